#pragma once
/// The environment fingerprint: what a run ran on (host, GPU, software stack, code state,
/// container, determinism settings, allow-listed environment variables with secrets masked).
///
/// The env module never links LibTorch (only `train` may): LibTorch's facts come in through
/// FingerprintOptions::torch_fields, which the CLI and the runner set to
/// train::torch_build_fields when the train module is built.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace expctl::env {

/// Version of the fingerprint's shape and canonical form; bump when a hashed field changes meaning.
inline constexpr int k_fingerprint_version = 1;

/// Raw LibTorch facts: "version" (TORCH_VERSION), "show_config" (at::show_config()) and
/// "library" (path of the loaded libtorch_cpu). Missing keys are recorded as "none".
using TorchFieldsProvider = std::function<std::map<std::string, std::string>()>;

/// Determinism settings of the run; `expctl env` shows the process defaults.
struct DeterminismSettings {
  std::optional<int64_t> seed;  ///< nullopt: recorded as "none"
  bool deterministic_algorithms = false;
  bool cudnn_deterministic = false;
  bool cudnn_benchmark = false;
};

/// How the TorchScript interpreter runs a scripted model (train::JitPolicy, set by the trainer);
/// recorded only for runs of a TorchScript model.
struct JitSettings {
  bool profiling_executor = true;
  bool tensorexpr_fuser = true;
};

/// What the probes read. Every default reads the real machine.
struct FingerprintOptions {
  /// Directory whose git state is recorded (the experiment directory).
  std::filesystem::path code_directory = ".";
  /// LibTorch facts; empty: every software.libtorch_* field is "none".
  TorchFieldsProvider torch_fields;
  DeterminismSettings determinism;
  /// A TorchScript model's interpreter switches: the `jit` group; nullopt (built-in models): no such group.
  std::optional<JitSettings> jit;
  /// Variables recorded in env.vars although the allow-list doesn't name them (a profile's pins).
  std::vector<std::string> extra_env_names;
  /// Environment to record; nullopt: this process's environment.
  std::optional<std::map<std::string, std::string>> environment;
  /// Root of /etc, /proc, /run, /var/lib/dpkg and /.dockerenv (tests point it at a fake tree).
  std::filesystem::path root = "/";
  /// Load NVML, cuDNN, NCCL and libcudart with dlopen when present.
  bool load_gpu_libraries = true;
  /// A user's program (spec program.command): its interpreter's stack fills the `program` group
  /// (probed once per interpreter and its package folders, then cached); empty: no such group.
  std::vector<std::string> program_command;
  /// Where the program starts (a relative argv[0] is found from here), and the PATH it is looked up in.
  std::filesystem::path program_workdir;
  std::string program_path;
};

/// Field values by field name ("host.os_id"), checked against the field table.
class Fingerprint {
 public:
  /// Sets a field; an unknown field or a value of the wrong type is an internal error.
  void set(std::string_view field, nlohmann::json value);
  /// The value of `field`, or nullptr when it is not set.
  const nlohmann::json* find(std::string_view field) const;
  /// The value of `field` as display text ("none" when unset; lists joined with ", ").
  std::string text(std::string_view field) const;
  /// Every set field, sorted by name.
  const std::map<std::string, nlohmann::json, std::less<>>& values() const { return m_values; }

  /// {"fingerprint_version": 1, "hash": ..., "fields": {"host": {"os_id": ...}, ...}}.
  nlohmann::json to_json() const;
  /// Reads to_json()'s shape (or a whole `expctl env --format json` document). Fields this
  /// expctl doesn't know are kept so that a diff still shows them; the stored "hash" is not
  /// trusted (hash() recomputes it). Throws util::EnvError naming `source` on a malformed document.
  static Fingerprint from_json(const nlohmann::json& document, std::string_view source);

  /// Compact JSON of the hashed fields only, keys sorted: the exact bytes that are hashed.
  std::string canonical() const;
  /// 64 lowercase hex characters: SHA-256(canonical()).
  std::string hash() const;

 private:
  std::map<std::string, nlohmann::json, std::less<>> m_values;
};

/// Probes this machine. Never fails for a missing GPU, git or container: those read "none".
Fingerprint collect_fingerprint(const FingerprintOptions& options = {});

/// Display text of one field value: strings as they are, lists joined with ", ", maps as
/// "k=v" joined with ", ", file lists as "path (sha256 prefix)".
std::string value_text(const nlohmann::json& value);

/// The text `expctl env` prints: the hash, then each group's fields in the field table's order,
/// one aligned line per field (a map or a file list one line per entry), the fields that are not
/// hashed marked so.
std::string render_fingerprint(const Fingerprint& fingerprint);

}  // namespace expctl::env
