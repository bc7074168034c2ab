#include "expctl/run/preflight.hpp"

#include "expctl/run/train_options.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {

bool needs_preflight(const spec::Spec& spec) {
  return spec.get_string("model.arch") == "torchscript" || spec.get_string("data.dataset") == "npy";
}

void preflight_training(const spec::Spec& spec) {
  if (!needs_preflight(spec)) {
    return;
  }
  const auto config = train_options(spec.values(), launch::RankIdentity{}, spec.input_paths());
  try {
    train::plugin::check_training(config);
  } catch (const util::TrainError& error) {
    // Before a run exists, what the model or the data gets wrong is the user's input to fix.
    throw util::TrainError(error.what(), util::ExitCode::usage);
  }
}

}  // namespace expctl::run
