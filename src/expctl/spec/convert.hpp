#pragma once
/// Typed conversion of one YAML value to a field's JSON value, by the rules of the field table:
/// YAML 1.2 core-schema scalars, but strict: a quoted "64" is a string, not an integer.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "expctl/spec/field_table.hpp"
#include "expctl/spec/yaml_tree.hpp"

namespace expctl::spec {

/// Why a value was refused, and where (the element of a list, or the value itself).
struct ConversionError {
  SourceMark mark;
  std::string message;  ///< names the field, e.g. `optim.lr must be a float, found "abc"`
};

/// Converts `node` to the JSON value of `field`: integers become number_integer, floats
/// number_float (so 64 and 64.0 are one value), lists JSON arrays. Checks type, range, choices,
/// list sizes and formats.
tl::expected<nlohmann::json, ConversionError> convert_value(const Field& field, const YamlNode& node);

/// Converts the value of entry `name` of the mapping field `map` (`--set program.params.lr=0.1`,
/// a sweep axis over `program.params.lr`), labelled "program.params.lr" in messages.
tl::expected<nlohmann::json, ConversionError> convert_entry(const Field& map, const std::string& name,
                                                            const YamlNode& node);

/// Checks a whole number that a command's own option gives for integer field `field` (`expctl run
/// --nnodes 2`) against the field's range, as convert_value checks one written in YAML; the
/// message names `label`. Throws InternalError when `field` is not an integer field.
tl::expected<nlohmann::json, ConversionError> convert_integer(const Field& field, std::int64_t value,
                                                              const std::string& label);

/// The field's default, parsed from its YAML text by convert_value; throws InternalError when
/// the table holds an invalid default (a unit test checks them all).
nlohmann::json default_value(const Field& field);

}  // namespace expctl::spec
