#pragma once
/// The one table of fingerprint fields. Collection, JSON output, the canonical form that is
/// hashed, `expctl env diff` and docs/env.md are all derived from it, so adding a field is one
/// line here plus the probe that fills it.

#include <optional>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

namespace expctl::env {

/// JSON shape of a field's value.
enum class FieldType {
  string,        ///< JSON string; "none" when the thing is absent
  integer,       ///< JSON integer
  boolean,       ///< JSON bool
  string_list,   ///< JSON array of strings
  integer_list,  ///< JSON array of integers
  string_map,    ///< JSON object of string -> string (sorted keys)
  file_list,     ///< JSON array of {"path": ..., "sha256": ...}
};

/// One fingerprint field. `name` is "group.key"; the group is the part before the dot.
struct FieldSpec {
  std::string_view name;
  FieldType type;
  bool hashed;  ///< enters the fingerprint hash (stable on one machine and stack)
  std::string_view doc;
};

/// Every field, grouped, in display order.
std::span<const FieldSpec> fields();

/// The field named `name`, or nullptr.
const FieldSpec* find_field(std::string_view name);

/// "host" for "host.os_id".
std::string_view group_of(std::string_view field_name);

/// "os_id" for "host.os_id".
std::string_view key_of(std::string_view field_name);

/// Groups in display order (host, gpu, software, code, container, determinism, env).
std::span<const std::string_view> groups();

/// "string", "integer", ... as written in docs/env.md.
std::string_view type_name(FieldType type);

/// True when `value` has the JSON shape `type` requires.
bool has_type(const nlohmann::json& value, FieldType type);

}  // namespace expctl::env
