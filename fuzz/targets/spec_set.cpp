// fuzz_spec_set: `--set key=value` overrides, as `expctl run SPEC --set ...` applies them
// (spec::load_spec with LoadOptions::overrides). The input is one override a line; after a line
// "%%" comes the spec file itself, otherwise a small valid spec is used.
#include <algorithm>
#include <string>
#include <vector>

#include "expctl/spec/spec.hpp"
#include "fuzz_support.hpp"

namespace {
constexpr std::string_view k_valid_spec = R"(name: fuzz
seed: 7
distributed:
  nproc_per_node: 2
data:
  dataset: synthetic
  num_samples: 256
  num_classes: 4
  input_shape: [16]
  batch_size: 16
model:
  arch: mlp
  hidden_sizes: [32]
optim:
  name: sgd
  lr: 0.05
train:
  max_steps: 6
)";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const std::string_view text = fuzz::as_text(data, size);
  std::string_view spec_text = k_valid_spec;
  spec::LoadOptions options;
  fuzz::for_each_line(text, [&](std::string_view line) {
    if (line == "%%") {
      const auto after = static_cast<std::size_t>(line.data() - text.data()) + line.size() + 1;
      spec_text = text.substr(std::min(after, text.size()));
      return false;
    }
    options.overrides.emplace_back(line);
    return true;
  });
  const auto file = fuzz::scratch() / "spec.yaml";
  fuzz::write_file(file, spec_text);
  fuzz::expect_only_user_errors([&] { (void)spec::load_spec(file, options); });
  return 0;
}
