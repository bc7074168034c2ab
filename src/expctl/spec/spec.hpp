#pragma once
/// An experiment spec: a YAML file validated against the field table (every problem reported at
/// once), with defaults filled in, `--set` overrides applied, and a canonical form whose SHA-256
/// is the spec hash. The recipe and every field are documented in docs/spec.md.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/spec/field_table.hpp"

namespace expctl::spec {

class SpecBuilder;

/// A file whose content changes results, as it joins the spec hash.
struct InputFile {
  std::string role;             ///< the field ("model.file") or "data.root/<file name>": what is hashed
  std::filesystem::path path;   ///< absolute where the spec gave a relative path; not hashed
  std::string sha256;           ///< 64 hex of the bytes, or "absent" (a packaged dataset file not found)
};

/// Options for loading a spec.
struct LoadOptions {
  std::vector<std::string> overrides;  ///< "key.path=value" from --set, typed by the field table, applied in order
  /// `expctl run --nnodes N`: distributed.nnodes, after the overrides (so it wins over a --set of
  /// it) and hashed like them, but handed over as the number it is, never as override text.
  std::optional<std::int64_t> nnodes{};
};

/// A validated spec with defaults filled in and overrides applied.
class Spec {
 public:
  /// As given by the user.
  const std::filesystem::path& file() const { return m_file; }
  /// Full nested tree of every field (defaults filled): integers as JSON integers, floats as
  /// JSON floats, lists as arrays.
  const nlohmann::json& values() const { return m_values; }

  /// Typed access by dotted path (e.g. "data.dataset"); the path must name a field of that type
  /// (a wrong path or type is an internal error).
  std::string get_string(std::string_view dotted_path) const;
  int64_t get_int(std::string_view dotted_path) const;
  double get_float(std::string_view dotted_path) const;
  bool get_bool(std::string_view dotted_path) const;
  std::vector<std::string> get_string_list(std::string_view dotted_path) const;
  std::vector<int64_t> get_int_list(std::string_view dotted_path) const;
  std::vector<double> get_float_list(std::string_view dotted_path) const;

  /// Absolute path of the pinned-stack profile named by `env`, resolved as documented (relative
  /// paths: the spec's directory, then each ancestor directory in turn); nullopt when `env` is unset.
  const std::optional<std::filesystem::path>& env_profile_path() const { return m_env_profile_path; }
  /// The profile's parsed content as hashed (null when `env` is unset).
  const nlohmann::json& env_profile() const { return m_env_profile; }

  /// The files whose content joins the hash (model.file, the npy arrays, a packaged dataset's
  /// files), in field-table order then the dataset's reading order.
  const std::vector<InputFile>& inputs() const { return m_inputs; }
  /// role -> sha256, as hashed under "inputs".
  nlohmann::json input_digests() const;
  /// absolute path -> sha256 of the inputs that exist: what a rank checks before it reads them
  /// (resolved.json's "inputs").
  nlohmann::json input_paths() const;
  /// The program's files whose content is hashed (docs/program.md): relative path -> SHA-256;
  /// null when the spec runs no program.
  const nlohmann::json& program_files() const { return m_program_files; }

  /// Exact bytes that were hashed (versioned, sorted, compact JSON).
  const std::string& canonical() const { return m_canonical; }
  /// 64 lowercase hex: SHA-256(canonical()).
  const std::string& hash() const { return m_hash; }

 private:
  friend class SpecBuilder;
  const nlohmann::json& at(std::string_view dotted_path, FieldType type) const;

  std::filesystem::path m_file;
  nlohmann::json m_values;
  std::optional<std::filesystem::path> m_env_profile_path;
  nlohmann::json m_env_profile;
  std::vector<InputFile> m_inputs;
  nlohmann::json m_program_files;
  std::string m_canonical;
  std::string m_hash;
};

/// Loads, validates (every problem at once) and canonicalises a spec; throws
/// util::DiagnosticError (exit 2) listing every problem as FILE:LINE:COL with caret (override
/// problems are named "--set key=value" instead of a position).
Spec load_spec(const std::filesystem::path& file, const LoadOptions& options = {});

/// A run's spec hashed again (`expctl resume` checks what it resumes): `values` as Spec::values()
/// gave them (a run's resolved.json) over the defaults, and the files whose content is hashed —
/// the program's files, model.file, the arrays, a packaged dataset's files, the env profile — read
/// again, relative names from `spec_file`'s folder as load_spec takes them. The spec file itself is
/// not read: the run is what its values say. Throws util::DiagnosticError (exit 2) for a value of
/// another type than its field's, or a file that cannot be read.
Spec rehash_values(const nlohmann::json& values, const std::filesystem::path& spec_file);

/// One part of a spec's canonical form that differs from the one a hash was recorded with.
struct HashChange {
  enum class Kind {
    recipe,  ///< another expctl_spec_version: nothing else can be compared
    file,    ///< a hashed file's content (program file, input, env profile), or its presence
    field,   ///< a hashed field's value
  };
  Kind kind = Kind::file;
  /// "/work/exp/train.py changed", "model.file /data/cnn.pt is missing", "optim.lr is 0.2, it was 0.1"
  std::string text;
};

/// What differs between the canonical form a spec hash was recorded with (`recorded`: the
/// store's SpecRecord::canonical) and `now`'s: files first (each named by its path), then fields.
std::vector<HashChange> canonical_changes(std::string_view recorded, const Spec& now);

/// One field that differs between two specs.
struct SpecChange {
  std::string path;          ///< dotted key path, or "env (profile content)" when only the profile differs
  nlohmann::json old_value;  ///< in `a`
  nlohmann::json new_value;  ///< in `b`
  bool hashed = false;       ///< the change is part of the spec hash
};

/// Every field whose value differs from `a` to `b`, in field-table order, then the profile content.
std::vector<SpecChange> diff_specs(const Spec& a, const Spec& b);

/// The same over stored value trees (Spec::values(), or the "spec" object of a canonical form):
/// a field missing from one side compares as null. Profile content is not part of these trees.
std::vector<SpecChange> diff_values(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace expctl::spec
