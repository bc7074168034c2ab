#include "expctl/env/env_vars.hpp"

#include <algorithm>
#include <cctype>

namespace expctl::env {

namespace {

struct AllowListEntry {
  std::string_view pattern;  ///< exact name, or a prefix when it ends in '*'
  EnvVarKind kind;
};

using enum EnvVarKind;

// Variables that change what a kernel or collective does are hashed; the launcher's per-job
// and per-rank variables would give every job its own environment hash, so they are recorded
// but not hashed.
constexpr AllowListEntry k_allow_list[] = {
    {"OMP_*", computation},
    {"KMP_*", computation},
    {"MKL_*", computation},
    {"OPENBLAS_*", computation},
    {"NCCL_*", computation},
    {"GLOO_*", computation},
    {"CUDA_*", computation},
    {"CUBLAS_*", computation},
    {"CUDNN_*", computation},
    {"NVIDIA_*", computation},
    {"TORCH_*", computation},
    {"PYTORCH_*", computation},
    {"LD_LIBRARY_PATH", computation},
    {"MASTER_*", launch},
    {"SLURM_*", launch},
    {"WORLD_SIZE", launch},
    {"RANK", launch},
    {"LOCAL_RANK", launch},
    {"LOCAL_WORLD_SIZE", launch},
    {"GROUP_RANK", launch},
    {"NODE_RANK", launch},
    {"TORCHELASTIC_*", launch},
    {"OMPI_COMM_WORLD_*", launch},
    {"PMI_*", launch},
};

// Matched case-insensitively anywhere in the name: NCCL_API_TOKEN, aws_secret_key, ...
constexpr std::string_view k_secret_markers[] = {"TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL", "AUTH"};

bool matches(std::string_view pattern, std::string_view name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return name.starts_with(pattern.substr(0, pattern.size() - 1));
  }
  return name == pattern;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return std::any_of(std::begin(k_secret_markers), std::end(k_secret_markers),
                     [&upper](std::string_view marker) { return upper.find(marker) != std::string::npos; });
}

std::optional<EnvVarKind> allow_listed(std::string_view name) {
  for (const AllowListEntry& entry : k_allow_list) {
    if (matches(entry.pattern, name)) {
      return entry.kind;
    }
  }
  return std::nullopt;
}

std::vector<std::string> allow_list_patterns() {
  std::vector<std::string> patterns;
  for (const AllowListEntry& entry : k_allow_list) {
    patterns.emplace_back(entry.pattern);
  }
  return patterns;
}

RecordedEnvVars record_env_vars(const std::map<std::string, std::string>& environment,
                                const std::vector<std::string>& extra) {
  RecordedEnvVars recorded;
  for (const auto& [name, value] : environment) {
    const bool is_extra = std::find(extra.begin(), extra.end(), name) != extra.end();
    const std::optional<EnvVarKind> kind = is_extra ? computation : allow_listed(name);
    if (!kind) {
      continue;
    }
    auto& target = *kind == computation ? recorded.computation : recorded.launch;
    target[name] = is_secret_name(name) ? std::string(k_masked_value) : value;
  }
  return recorded;
}

}  // namespace expctl::env
