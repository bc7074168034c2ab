#pragma once
/// Which environment variables a fingerprint records, and masking of secret-looking ones.
/// A secret must never reach output, the database or a report, so masking happens when the
/// value is read, before anything else sees it.

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace expctl::env {

/// What a recorded variable is for.
enum class EnvVarKind {
  computation,  ///< shapes the computation (OMP_*, NCCL_*...): recorded in env.vars, hashed
  launch,       ///< differs per job or rank (SLURM_*, MASTER_*, RANK...): env.launch_vars, not hashed
};

/// The value that replaces a secret.
inline constexpr std::string_view k_masked_value = "***";

/// How a marker of the secret table is held against one word of a variable's name.
enum class SecretMatch {
  anywhere,    ///< contained anywhere in the word: TOKEN masks HF_TOKEN and GITHUBTOKEN
  whole_word,  ///< the whole word: KEY masks WANDB_API_KEY, not KEYBOARD_LAYOUT or MONKEY
  innocent,    ///< the whole word is never a secret, though it contains a marker: TOKENIZERS
};

struct SecretMarker {
  std::string_view word;  ///< upper case
  SecretMatch match;
};

/// The one table of secret markers; docs/env.md lists it and a test keeps the two equal.
std::span<const SecretMarker> secret_markers();

/// The words of a variable name, upper-cased: split at every character that is not an ASCII
/// letter ('_', '-', '.', digits...) and where a lower-case letter meets an upper-case one, so
/// "openaiApiKey2" gives OPENAI, API, KEY.
std::vector<std::string> name_words(std::string_view name);

/// True when a word of the name (name_words) is a `whole_word` marker or contains an `anywhere`
/// marker and is not an `innocent` word (any case).
bool is_secret_name(std::string_view name);

/// The kind of an allow-listed variable, or nullopt when the allow-list doesn't name it.
std::optional<EnvVarKind> allow_listed(std::string_view name);

/// The allow-list as display text ("OMP_*", "RANK"...), for docs and --help.
std::vector<std::string> allow_list_patterns();

/// What a record keeps of the variable `name` set to `value`: k_masked_value for a secret-looking
/// name (is_secret_name), else `value` with URL passwords masked (mask_url_password).
std::string recorded_value(std::string_view name, std::string value);

/// Every string value of the object `variables` (NAME -> value, e.g. a spec's program.env) as
/// recorded_value gives it, in place; anything but an object is left as it is.
void mask_variables(nlohmann::json& variables);

struct RecordedEnvVars {
  std::map<std::string, std::string> computation;  ///< env.vars
  std::map<std::string, std::string> launch;       ///< env.launch_vars
};

/// The allow-listed variables of `environment` plus the `extra` names (recorded as
/// computation variables), secret values replaced by k_masked_value.
RecordedEnvVars record_env_vars(const std::map<std::string, std::string>& environment,
                                const std::vector<std::string>& extra = {});

/// `value` with the password of every URL in it ("scheme://user:password@host") replaced by
/// k_masked_value: a store URL in an allow-listed variable must not carry its password into a run.
std::string mask_url_password(std::string value);

}  // namespace expctl::env
