#include "expctl/run/stack.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "expctl/env/fingerprint.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/run/program.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/spec/profile.hpp"
#include "expctl/train/options.hpp"
#include "expctl/train/plugin.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

// What a run's fingerprint is collected with: the experiment's directory for the code state,
// LibTorch's build facts, the spec's determinism settings.
env::FingerprintOptions fingerprint_options(const std::filesystem::path& spec_file, const json& spec) {
  env::FingerprintOptions options;
  options.code_directory = std::filesystem::absolute(spec_file).parent_path();
  options.torch_fields = train::plugin::torch_build_fields;
  options.determinism.seed = spec.at("seed").get<std::int64_t>();
  options.determinism.deterministic_algorithms = spec.at("determinism").get<std::string>() == "strict";
  if (!spec::has_program(spec)) {
    // A TorchScript model's interpreter switches, as the trainer sets them (train::apply_jit_policy).
    const auto& train = spec.at("train");
    if (const auto jit = train::jit_policy(train::parse_model_kind(spec.at("model").at("arch").get<std::string>()),
                                           train.at("amp").at("enabled").get<bool>())) {
      options.jit = env::JitSettings{.profiling_executor = jit->profiling_executor,
                                     .tensorexpr_fuser = jit->tensorexpr_fuser};
    }
  }
  if (spec::has_program(spec)) {
    // The interpreter a program's ranks run is part of its stack (python, packages, torch).
    options.program_command = spec.at("program").at("command").get<std::vector<std::string>>();
    options.program_workdir = program_workdir(spec, spec_file);
    const auto& env = spec.at("program").at("env");
    const char* path = std::getenv("PATH");
    options.program_path = env.contains("PATH") ? env.at("PATH").get<std::string>() : std::string(path ? path : "");
  }
  return options;
}

}  // namespace

std::vector<env::VerifyRow> StackCheck::drifted() const {
  std::vector<env::VerifyRow> result;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(result), [](const env::VerifyRow& row) { return !row.ok; });
  return result;
}

std::vector<env::DiffRow> resume_drift(const store::Store& store, const store::RunRecord& run,
                                       const ResolvedRun& resolved) {
  const auto text = run.environment_hash ? store.environment(*run.environment_hash) : std::nullopt;
  if (!text) {
    return {};  // recorded before fingerprints existed: nothing to hold the machine against
  }
  const auto recorded = env::Fingerprint::from_json(json::parse(*text), fmt::format("run {}'s fingerprint", run.id));
  auto options = fingerprint_options(resolved.spec_file, resolved.spec);
  // Record the same variables as the first invocation did (its profile's pins among them).
  if (const json* vars = recorded.find("env.vars"); vars != nullptr && vars->is_object()) {
    for (const auto& [name, value] : vars->items()) {
      options.extra_env_names.push_back(name);
    }
  }
  auto rows = env::diff_fingerprints(recorded, env::collect_fingerprint(options));
  std::erase_if(rows, [](const env::DiffRow& row) { return !row.hashed; });
  return rows;
}

StackCheck check_pinned_stack(const spec::Spec& spec) {
  std::optional<env::Profile> profile;
  if (const auto& path = spec.env_profile_path()) {
    profile = env::load_profile(*path, spec::display_path(*path));
  }
  env::FingerprintOptions options = fingerprint_options(spec.file(), spec.values());
  if (profile) {
    options.extra_env_names = profile->env_names();
  }
  const env::Fingerprint fingerprint = env::collect_fingerprint(options);
  StackCheck check;
  check.fingerprint = fingerprint.to_json();
  check.fingerprint_hash = fingerprint.hash();
  if (profile) {
    check.rows = env::verify_profile(*profile, fingerprint);
  }
  if (const std::string image = spec.get_string("container.image"); !image.empty()) {
    check.rows.push_back(env::verify_image_pin(image, fingerprint));
  }
  return check;
}

}  // namespace expctl::run
