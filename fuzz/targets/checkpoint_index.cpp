// fuzz_checkpoint_index: a checkpoint's index rank0-step<S>.json, as a resume reads the
// checkpoints folder (train::resume_point, list_checkpoints, newest_intact). Beside it lie an
// intact checkpoint of step 4 (file and index) and a 5-byte rank0-step8.pt.
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/util/sha256.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static const auto dir = [] {
    auto folder = fuzz::scratch() / "checkpoints";
    std::filesystem::create_directories(folder);
    fuzz::write_file(train::checkpoint_path(folder, 0, 4), "four!");
    train::write_checkpoint_index({0, 4, train::checkpoint_path(folder, 0, 4), util::sha256_hex("four!"), 5, "run"});
    fuzz::write_file(train::checkpoint_path(folder, 0, 8), "eight");
    return folder;
  }();
  fuzz::write_file(dir / "rank0-step8.json", fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] {
    (void)train::resume_point(dir, {0}, "run");
    (void)train::list_checkpoints(dir, 0);
    std::vector<std::string> problems;
    (void)train::newest_intact(dir, 0, &problems, "run");
  });
  return 0;
}
