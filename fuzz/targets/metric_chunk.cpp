// fuzz_metric_chunk: a metric chunk's stored bytes (a metric_chunks row's data, the same bytes on
// every backend), as every series reader decodes them (store::chunk::decode). The points of bytes
// that decode must survive encode and decode again unchanged, in each format.
#include <cstdlib>

#include "fuzz_support.hpp"

#include "expctl/store/chunk_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::expect_only_user_errors([&] {
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    store::chunk::decode(bytes, steps, bits);
    // Every format on its own (the decimal one where it applies), and the one encode() chooses.
    // The store encodes k_chunk_points at most: a longer chunk (format 3 packs a constant in 0 bits
    // a point, so 12 bytes can hold 700 000 points) comes only from damaged or hand-made bytes,
    // and is held to decoding alone (four encodings of it under ASan take seconds).
    if (static_cast<std::int64_t>(steps.size()) > store::chunk::k_chunk_points) {
      return;
    }
    for (const std::uint8_t format : {store::chunk::k_format_xor, store::chunk::k_format_shuffled,
                                      store::chunk::k_format_decimal, std::uint8_t{0}}) {
      const std::string again =
          format == 0 ? store::chunk::encode(steps, bits) : store::chunk::encode_as(format, steps, bits);
      if (again.empty() && format == store::chunk::k_format_decimal) {
        continue;
      }
      std::vector<std::int64_t> steps_again;
      std::vector<std::uint64_t> bits_again;
      store::chunk::decode(again, steps_again, bits_again);
      if (steps_again != steps || bits_again != bits) {
        std::abort();
      }
    }
  });
  return 0;
}
