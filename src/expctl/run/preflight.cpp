#include "expctl/run/preflight.hpp"

#include <fmt/format.h>

#include "expctl/env/probes.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {

bool needs_preflight(const spec::Spec& spec) {
  if (spec::has_program(spec.values())) {
    return false;  // the program loads its own model and data
  }
  return spec.get_string("model.arch") == "torchscript" || spec.get_string("data.dataset") == "npy" ||
         spec.get_string("data.dataset") == "tokens";
}

void check_backend(const spec::Spec& spec, std::optional<int> gpu_count) {
  if (spec::has_program(spec.values()) || spec.get_string("distributed.backend") != "nccl") {
    return;
  }
  if (const auto& path = spec.env_profile_path()) {
    const env::Profile profile = env::load_profile(*path, spec::display_path(*path));
    for (const env::Pin& pin : profile.pins) {
      const bool cuda_pin = pin.field == "gpu.nccl" || pin.field == "gpu.cuda_runtime" ||
                            pin.field == "software.libtorch_cuda";
      if (cuda_pin && pin.pattern.kind() == env::VersionPattern::Kind::none) {
        throw util::UsageError(fmt::format(
            "distributed.backend nccl contradicts the spec's env profile {}, which pins {} = \"none\" (line {}): use "
            "distributed.backend gloo (or auto) with this profile, or a profile for a CUDA stack",
            profile.file, pin.key, pin.line));
      }
    }
  }
  if (!gpu_count) {
    env::Fingerprint fingerprint;
    env::probes::probe_gpu(fingerprint, {});
    const nlohmann::json* count = fingerprint.find("gpu.count");
    gpu_count = count != nullptr && count->is_number_integer() ? count->get<int>() : 0;
  }
  if (*gpu_count == 0) {
    throw util::UsageError(
        "distributed.backend nccl needs a CUDA GPU, and this machine has none (gpu.count 0 in `expctl env`): use "
        "distributed.backend gloo, or auto (nccl where there are GPUs, gloo elsewhere)");
  }
}

void preflight_training(const spec::Spec& spec) {
  check_backend(spec);
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
