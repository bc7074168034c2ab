// fuzz_metric_chunk: a metric chunk's stored bytes (a metric_chunks row's data, the same bytes on
// every backend), as every series reader decodes them (store::chunk::decode). The points of bytes
// that decode must survive encode and decode again unchanged.
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
    std::vector<std::int64_t> steps_again;
    std::vector<std::uint64_t> bits_again;
    store::chunk::decode(store::chunk::encode(steps, bits), steps_again, bits_again);
    if (steps_again != steps || bits_again != bits) {
      std::abort();
    }
  });
  return 0;
}
