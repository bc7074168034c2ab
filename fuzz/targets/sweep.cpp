// fuzz_sweep: a sweep file, as `expctl sweep FILE` loads it (sweep::load_sweep: the file, then
// every point's spec). base.yaml beside it is a small valid spec.
#include "expctl/sweep/sweep.hpp"
#include "fuzz_support.hpp"

namespace {
constexpr std::string_view k_base = R"(name: base
data:
  dataset: synthetic
  num_samples: 256
  num_classes: 4
  input_shape: [8]
  batch_size: 16
model:
  arch: mlp
  hidden_sizes: [8]
train:
  max_steps: 4
)";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  static const bool base_written = (fuzz::write_file(fuzz::scratch() / "base.yaml", k_base), true);
  (void)base_written;
  const auto file = fuzz::scratch() / "sweep.yaml";
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] {
    if (sweep::is_sweep_file(file)) {
      (void)sweep::to_json(sweep::load_sweep(file));
    }
  });
  return 0;
}
