// fuzz_store_merge: a hostile file given to `expctl merge` as a source (store::merge_store into
// a fresh destination store).
#include "expctl/store/store.hpp"
#include "fuzz_support.hpp"
#include "store_seed.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto dir = fuzz::scratch() / "merge";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::create_directories(dir / "source");
  const auto source = dir / "source" / "store.db";
  fuzz::write_file(source, fuzz::as_text(data, size));
  auto destination = store::Store::open((dir / "destination.db").string());
  fuzz::expect_only_user_errors([&] { (void)store::merge_store(destination, source); });
  if (store::check_integrity(destination) != "ok") {
    __builtin_trap();  // a merge that failed must leave the destination intact
  }
  return 0;
}
