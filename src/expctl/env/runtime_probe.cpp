// The determinism settings and the allow-listed environment variables.

#include <unistd.h>

#include "expctl/env/env_vars.hpp"
#include "expctl/env/probes.hpp"

extern char** environ;  // NOLINT: POSIX

namespace expctl::env::probes {

std::map<std::string, std::string> effective_environment(const FingerprintOptions& options) {
  if (options.environment) {
    return *options.environment;
  }
  std::map<std::string, std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const size_t equals = text.find('=');
    if (equals != std::string_view::npos && equals > 0) {
      environment.emplace(text.substr(0, equals), text.substr(equals + 1));
    }
  }
  return environment;
}

void probe_determinism(Fingerprint& fingerprint, const FingerprintOptions& options) {
  const DeterminismSettings& settings = options.determinism;
  const auto environment = effective_environment(options);
  const auto workspace = environment.find("CUBLAS_WORKSPACE_CONFIG");
  fingerprint.set("determinism.seed", settings.seed ? std::to_string(*settings.seed) : "none");
  fingerprint.set("determinism.deterministic_algorithms", settings.deterministic_algorithms);
  fingerprint.set("determinism.cublas_workspace_config",
                  workspace == environment.end() ? "none" : valid_utf8(workspace->second));
  fingerprint.set("determinism.cudnn_deterministic", settings.cudnn_deterministic);
  fingerprint.set("determinism.cudnn_benchmark", settings.cudnn_benchmark);
}

void probe_jit(Fingerprint& fingerprint, const FingerprintOptions& options) {
  if (!options.jit) {
    return;
  }
  fingerprint.set("jit.executor", options.jit->profiling_executor ? "profiling" : "legacy");
  fingerprint.set("jit.tensorexpr_fuser", options.jit->tensorexpr_fuser);
}

void probe_env_vars(Fingerprint& fingerprint, const FingerprintOptions& options) {
  const RecordedEnvVars recorded = record_env_vars(effective_environment(options), options.extra_env_names);
  const auto to_json = [](const std::map<std::string, std::string>& variables) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [name, value] : variables) {
      object[valid_utf8(name)] = valid_utf8(value);
    }
    return object;
  };
  fingerprint.set("env.vars", to_json(recorded.computation));
  fingerprint.set("env.launch_vars", to_json(recorded.launch));
}

}  // namespace expctl::env::probes
