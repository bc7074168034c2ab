#pragma once
/// The one table of spec fields. Validation, defaults, `--set`, the canonical form that is
/// hashed, the structural diff and the field table in docs/spec.md are all derived from it, so
/// adding a field is one line in field_table.cpp.

#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::spec {

/// Value type of a field; lists hold elements of the named scalar type.
enum class FieldType {
  string,        ///< any scalar, kept as text
  integer,       ///< 64-bit signed, written without a decimal point or quotes
  floating,      ///< finite double; an integer is accepted and becomes a float
  boolean,       ///< true or false
  choice,        ///< one of Field::choices
  string_list,   ///< list of strings
  integer_list,  ///< list of integers
  float_list,    ///< list of floats
  image,         ///< "name@sha256:<64 lowercase hex>" or "" (no container)
  threshold,     ///< regression threshold: "-5%" (relative), "-0.5pp" (percentage points) or a number (absolute)
  param_map,     ///< free mapping of names to scalars or lists of scalars, typed as YAML types them
  string_map,    ///< mapping of names to strings (environment variables)
  param_value,   ///< one entry of a param_map: a scalar (integer, float, bool or string) or a list of them
};

/// Whether and how a field enters the spec hash.
enum class Hashing {
  hashed,           ///< the value is part of the canonical form
  excluded,         ///< cannot change results (names, docs, logging cadence, timeouts, locations)
  profile_content,  ///< the value is a path: the referenced file's parsed content is hashed instead
  /// The value is a path (relative to the spec's folder; made absolute when loaded): the SHA-256
  /// of the file's bytes is hashed instead, under the field's name (Spec::inputs()).
  file_content,
  /// Part of the canonical form only when it differs from its default: a field added later
  /// leaves the hash of every spec that does not use it as it was.
  hashed_unless_default,
  /// A list of paths (globs): the content of the files they name is hashed, not the paths
  /// (program.files); only for specs that run a program.
  files_content,
  /// The value is a folder's path (relative to the spec's folder; made absolute when loaded): the
  /// digest of the image folder it holds (classes, file names, sizes, contents:
  /// util::image_folder_digest) is hashed instead, under the field's name (Spec::inputs()).
  folder_content,
};

/// Closed or open bounds for numbers (list elements included).
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;  ///< min itself is not allowed
  bool max_open = false;  ///< max itself is not allowed
};

/// Allowed number of list elements.
struct ListSize {
  size_t min = 0;
  size_t max = 64;
};

/// One spec field.
struct Field {
  std::string_view path;  ///< dotted key path, e.g. "optim.lr"
  FieldType type;
  std::string_view default_yaml;  ///< the default, written as YAML and parsed like user input
  std::string_view choices;       ///< "a|b|c" for FieldType::choice, empty otherwise
  Range range;                    ///< numbers and numeric list elements
  ListSize size;                  ///< list fields
  Hashing hashing;
  std::string_view doc;          ///< meaning, one or two sentences, for docs/spec.md
  std::string_view default_doc;  ///< shown instead of default_yaml when the default is derived
};

/// Every field, in documentation order (sections together).
std::span<const Field> fields();

/// The field with this dotted path, or nullptr.
const Field* find_field(std::string_view path);

/// For a path one level under a mapping field ("program.params.lr", "program.env.OMP_PROC_BIND"):
/// the mapping field, and the entry's name in `entry` (not yet checked: convert_entry does);
/// nullptr otherwise.
const Field* find_map_field(std::string_view path, std::string* entry = nullptr);

/// An entry name of a mapping field: 1 to 128 letters, digits, '_' or '-', not starting with a
/// digit (what a placeholder, an environment variable and a dotted `--set` path can all carry).
bool valid_entry_name(std::string_view name);

/// The field that types one entry of a mapping field: `--set program.params.lr=0.1` and sweep
/// axes over such entries convert their values with it (its path is the mapping's, ending in ".*").
const Field& map_entry_field(const Field& map);

/// True when `path` is a section (a proper prefix of some field path, e.g. "train.amp").
bool is_section(std::string_view path);

/// Names directly under `section` ("" for the top level): fields and sub-sections, for
/// "did you mean" and for messages.
std::vector<std::string> child_names(std::string_view section);

/// The names a "did you mean" hint considers under `section`: child_names() plus common
/// synonyms (e.g. "learning_rate"); suggestion_for() maps a synonym back to the real name.
std::vector<std::string> suggestion_candidates(std::string_view section);

/// The real name for a candidate returned by suggestion_candidates() (itself unless a synonym).
std::string suggestion_for(std::string_view section, const std::string& candidate);

/// The field a mistyped path probably meant, for "did you mean": "optim.lerning_rate" ->
/// "optim.lr" (the last name matched within its section, synonyms included); a path whose
/// section is unknown is matched against every field path. nullopt when nothing is close.
std::optional<std::string> suggest_field_path(const std::string& path);

/// The allowed choices of a choice field, in table order.
std::vector<std::string> choices_of(const Field& field);

/// "integer", "float", "list of integers"... as used in messages and docs.
std::string_view type_name(FieldType type);

/// The field table as Markdown, exactly as it appears in docs/spec.md between the markers
/// k_table_begin and k_table_end (regenerate with `expctl validate --print-field-table`).
std::string render_field_table_markdown();

inline constexpr std::string_view k_table_begin =
    "<!-- BEGIN FIELD TABLE: generated by `expctl validate --print-field-table` -->";
inline constexpr std::string_view k_table_end = "<!-- END FIELD TABLE -->";

}  // namespace expctl::spec
