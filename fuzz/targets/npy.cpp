// fuzz_npy: a NumPy .npy file named by a spec's data.train_x/... (train::map_npy, which parses
// the header with train::parse_npy_header and checks the sizes).
#include "expctl/train/npy_file.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto file = fuzz::scratch() / "array.npy";
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] {
    const auto array = train::map_npy(file);
    // The elements the header promises must lie inside the file.
    const auto bytes = static_cast<std::size_t>(array.header.elements()) * train::npy_item_size(array.header.dtype);
    if (array.header.data_offset + bytes > array.bytes.size()) {
      __builtin_trap();
    }
  });
  return 0;
}
