#pragma once
/// Which environment variables a fingerprint records, and masking of secret-looking ones.
/// A secret must never reach output, the database or a report, so masking happens when the
/// value is read, before anything else sees it.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::env {

/// What a recorded variable is for.
enum class EnvVarKind {
  computation,  ///< shapes the computation (OMP_*, NCCL_*...): recorded in env.vars, hashed
  launch,       ///< differs per job or rank (SLURM_*, MASTER_*, RANK...): env.launch_vars, not hashed
};

/// The value that replaces a secret.
inline constexpr std::string_view k_masked_value = "***";

/// True when the name contains TOKEN, SECRET, KEY, PASSWORD, CREDENTIAL or AUTH (any case).
bool is_secret_name(std::string_view name);

/// The kind of an allow-listed variable, or nullopt when the allow-list doesn't name it.
std::optional<EnvVarKind> allow_listed(std::string_view name);

/// The allow-list as display text ("OMP_*", "RANK"...), for docs and --help.
std::vector<std::string> allow_list_patterns();

struct RecordedEnvVars {
  std::map<std::string, std::string> computation;  ///< env.vars
  std::map<std::string, std::string> launch;       ///< env.launch_vars
};

/// The allow-listed variables of `environment` plus the `extra` names (recorded as
/// computation variables), secret values replaced by k_masked_value.
RecordedEnvVars record_env_vars(const std::map<std::string, std::string>& environment,
                                const std::vector<std::string>& extra = {});

}  // namespace expctl::env
