// fuzz_resolved_run: a run folder's resolved.json, as `expctl resume` and `expctl worker` read
// it (run::read_resolved_run).
#include "expctl/run/resolved_run.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static const auto dir = [] {
    auto folder = fuzz::scratch() / "run";
    std::filesystem::create_directories(folder);
    return folder;
  }();
  fuzz::write_file(dir / "resolved.json", fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] { (void)run::read_resolved_run(dir); });
  return 0;
}
