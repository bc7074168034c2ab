#include "expctl/spec/convert.hpp"

#include <charconv>
#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::spec {

namespace {

using Result = tl::expected<nlohmann::json, ConversionError>;

tl::unexpected<ConversionError> refuse(const YamlNode& node, std::string message) {
  return tl::unexpected<ConversionError>(ConversionError{node.mark, std::move(message)});
}

bool is_plain(const YamlNode& node) {
  return node.kind == YamlNode::Kind::scalar && !node.quoted;
}

// YAML 1.2 core schema: decimal integers only (no 0x/0o, no "_" separators, which YAML 1.1 had).
bool looks_like_integer(std::string_view text) {
  static const std::regex pattern("[-+]?[0-9]+");
  return std::regex_match(text.begin(), text.end(), pattern);
}

bool looks_like_float(std::string_view text) {
  static const std::regex pattern(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  return std::regex_match(text.begin(), text.end(), pattern);
}

// Describes what was found; a quoted value that would be valid unquoted gets the fix as a hint.
std::string found(const YamlNode& node, bool valid_unquoted) {
  if (node.kind == YamlNode::Kind::scalar && node.quoted && valid_unquoted) {
    return describe_kind(node) + " (write it without quotes)";
  }
  return describe_kind(node);
}

std::string bound_text(double value) {
  return fmt::format("{}", value);
}

std::optional<std::string> range_problem(const Range& range, double value) {
  const bool too_low = range.min_open ? value <= range.min : value < range.min;
  const bool too_high = range.max_open ? value >= range.max : value > range.max;
  if (!too_low && !too_high) {
    return std::nullopt;
  }
  const bool has_min = !std::isinf(range.min);
  const bool has_max = !std::isinf(range.max);
  const std::string lower = fmt::format("{} {}", range.min_open ? ">" : ">=", bound_text(range.min));
  const std::string upper = fmt::format("{} {}", range.max_open ? "<" : "<=", bound_text(range.max));
  if (has_min && has_max) {
    if (!range.min_open && !range.max_open) {
      return fmt::format("between {} and {}", bound_text(range.min), bound_text(range.max));
    }
    return lower + " and " + upper;
  }
  return has_min ? lower : upper;
}

Result number_in_range(const std::string& label, const Range& range, const YamlNode& node, nlohmann::json value) {
  const double number = value.get<double>();
  if (const auto problem = range_problem(range, number)) {
    return refuse(node, fmt::format("{} must be {}, found {}", label, *problem, node.value));
  }
  return value;
}

Result to_integer(const std::string& label, const Range& range, const YamlNode& node) {
  if (!is_plain(node) || !looks_like_integer(node.value)) {
    return refuse(node,
                  fmt::format("{} must be an integer, found {}", label, found(node, looks_like_integer(node.value))));
  }
  int64_t value = 0;
  const std::string_view text = node.value[0] == '+' ? std::string_view(node.value).substr(1) : node.value;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) {
    return refuse(node, fmt::format("{} must be an integer, found {} (too large)", label, node.value));
  }
  return number_in_range(label, range, node, value);
}

Result to_float(const std::string& label, const Range& range, const YamlNode& node) {
  if (is_plain(node) && (node.value == ".inf" || node.value == "-.inf" || node.value == ".nan")) {
    return refuse(node, fmt::format("{} must be a finite number, found {}", label, node.value));
  }
  if (!is_plain(node) || !looks_like_float(node.value)) {
    return refuse(node, fmt::format("{} must be a float, found {}", label, found(node, looks_like_float(node.value))));
  }
  const std::string_view text = node.value[0] == '+' ? std::string_view(node.value).substr(1) : node.value;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value)) {
    return refuse(node, fmt::format("{} must be a finite float, found {}", label, node.value));
  }
  // -0.0 and 0.0 are one value; the canonical form must not tell them apart.
  return number_in_range(label, range, node, value == 0.0 ? 0.0 : value);
}

Result to_boolean(const std::string& label, const YamlNode& node) {
  if (is_plain(node)) {
    if (node.value == "true" || node.value == "True" || node.value == "TRUE") {
      return true;
    }
    if (node.value == "false" || node.value == "False" || node.value == "FALSE") {
      return false;
    }
  }
  const bool boolean_text = node.value == "true" || node.value == "false";
  return refuse(node, fmt::format("{} must be true or false, found {}", label, found(node, boolean_text)));
}

Result to_string(const std::string& label, const YamlNode& node) {
  if (node.kind != YamlNode::Kind::scalar) {
    return refuse(node, fmt::format("{} must be a string, found {}", label, describe_kind(node)));
  }
  return node.value;
}

Result to_choice(const Field& field, const std::string& label, const YamlNode& node) {
  const std::vector<std::string> choices = choices_of(field);
  if (node.kind == YamlNode::Kind::scalar && std::find(choices.begin(), choices.end(), node.value) != choices.end()) {
    return node.value;
  }
  std::string message =
      fmt::format("{} must be one of {}, found {}", label, util::join(choices, ", "), describe_kind(node));
  if (node.kind == YamlNode::Kind::scalar) {
    if (const auto suggestion = util::closest_match(node.value, choices)) {
      message += fmt::format(" (did you mean {}?)", util::quoted(*suggestion));
    }
  }
  return refuse(node, message);
}

Result to_image(const std::string& label, const YamlNode& node) {
  auto text = to_string(label, node);
  if (!text || text->get<std::string>().empty()) {
    return text;
  }
  static const std::regex pattern("[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}");
  if (!std::regex_match(node.value, pattern)) {
    return refuse(node, fmt::format("{} must be pinned by digest as name@sha256:<64 lowercase hex digits>, found {}",
                                    label, util::quoted(node.value)));
  }
  return text;
}

Result to_threshold(const std::string& label, const YamlNode& node) {
  // The grammar of compare::parse_threshold: relative "-5%", percentage points "-0.5pp", or a
  // number (absolute); the sign, when written, names the worse direction.
  static const std::regex relative_or_points(R"([-+]?[0-9]+(\.[0-9]+)?(%|pp))");
  if (node.kind == YamlNode::Kind::scalar && std::regex_match(node.value, relative_or_points)) {
    return node.value;
  }
  if (is_plain(node) && looks_like_float(node.value)) {
    return to_float(label, Range{}, node);
  }
  return refuse(node, fmt::format("{} must be a percentage (\"-5%\"), percentage points (\"-0.5pp\") or "
                                  "a number, found {}",
                                  label, describe_kind(node)));
}

// A program parameter is typed as YAML's core schema types it: 3 is an integer, 0.1 a float, true a
// bool, anything else (or anything quoted) a string. Non-finite floats are refused as in every field.
Result to_param_scalar(const std::string& label, const YamlNode& node) {
  if (node.kind != YamlNode::Kind::scalar) {
    return refuse(node, fmt::format("{} must be a scalar or a list of scalars, found {}", label, describe_kind(node)));
  }
  if (!node.quoted) {
    if (looks_like_integer(node.value)) {
      return to_integer(label, Range{}, node);
    }
    if (looks_like_float(node.value) || node.value == ".inf" || node.value == "-.inf" || node.value == ".nan") {
      return to_float(label, Range{}, node);
    }
    if (node.value == "true" || node.value == "True" || node.value == "TRUE" || node.value == "false" ||
        node.value == "False" || node.value == "FALSE") {
      return to_boolean(label, node);
    }
  }
  return node.value;
}

Result to_param_value(const Field& field, const std::string& label, const YamlNode& node) {
  if (node.kind != YamlNode::Kind::sequence) {
    return to_param_scalar(label, node);
  }
  if (node.items.size() > field.size.max) {
    return refuse(node, fmt::format("{} must have at most {} items, found {}", label, field.size.max, node.items.size()));
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < node.items.size(); ++i) {
    auto item = to_param_scalar(fmt::format("{}[{}]", label, i), node.items[i]);
    if (!item) {
      return item;
    }
    out.push_back(std::move(*item));
  }
  return out;
}

bool valid_env_name(std::string_view name) {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(name.begin(), name.end(), pattern);
}

Result to_map(const Field& field, const YamlNode& node) {
  const std::string label(field.path);
  if (node.kind == YamlNode::Kind::null) {
    return nlohmann::json::object();
  }
  if (node.kind != YamlNode::Kind::mapping) {
    return refuse(node, fmt::format("{} must be a mapping of names to values, e.g. \"{}\", found {}", label,
                                    field.type == FieldType::param_map ? "lr: 0.1" : "OMP_PROC_BIND: close",
                                    describe_kind(node)));
  }
  constexpr size_t k_max_entries = 1024;
  if (node.entries.size() > k_max_entries) {
    return refuse(node, fmt::format("{} has {} entries, more than the {} allowed", label, node.entries.size(),
                                    k_max_entries));
  }
  const Field& entry_field = map_entry_field(field);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : node.entries) {
    const bool env = field.type == FieldType::string_map;
    if (env ? !valid_env_name(key.value) : !valid_entry_name(key.value)) {
      return refuse(key, fmt::format("{} name {} is not valid: use {}", label, util::quoted(key.value),
                                     env ? "letters, digits and '_', not starting with a digit"
                                         : "1 to 128 letters, digits, '_' or '-', not starting with a digit"));
    }
    const std::string entry_label = label + "." + key.value;
    auto converted = env ? to_string(entry_label, value) : to_param_value(entry_field, entry_label, value);
    if (!converted) {
      return converted;
    }
    out[key.value] = std::move(*converted);
  }
  return out;
}

Result to_scalar(const Field& field, FieldType type, const std::string& label, const YamlNode& node) {
  switch (type) {
    case FieldType::integer:
    case FieldType::integer_list:
      return to_integer(label, field.range, node);
    case FieldType::floating:
    case FieldType::float_list:
      return to_float(label, field.range, node);
    case FieldType::boolean:
      return to_boolean(label, node);
    case FieldType::choice:
      return to_choice(field, label, node);
    case FieldType::image:
      return to_image(label, node);
    case FieldType::threshold:
      return to_threshold(label, node);
    case FieldType::string:
    case FieldType::string_list:
      return to_string(label, node);
    case FieldType::param_value:
      return to_param_scalar(label, node);
    case FieldType::param_map:
    case FieldType::string_map:
      break;
  }
  return refuse(node, label + " has an unknown type");
}

Result to_list(const Field& field, const YamlNode& node) {
  const std::string label(field.path);
  if (node.kind != YamlNode::Kind::sequence) {
    return refuse(node, fmt::format("{} must be a {}, found {}", label, type_name(field.type), describe_kind(node)));
  }
  if (node.items.size() < field.size.min || node.items.size() > field.size.max) {
    const std::string expected = field.size.min == field.size.max
                                     ? fmt::format("exactly {}", field.size.min)
                                     : fmt::format("{} to {}", field.size.min, field.size.max);
    return refuse(node, fmt::format("{} must have {} items, found {}", label, expected, node.items.size()));
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < node.items.size(); ++i) {
    auto item = to_scalar(field, field.type, fmt::format("{}[{}]", label, i), node.items[i]);
    if (!item) {
      return item;
    }
    out.push_back(std::move(*item));
  }
  return out;
}

}  // namespace

tl::expected<nlohmann::json, ConversionError> convert_value(const Field& field, const YamlNode& node) {
  switch (field.type) {
    case FieldType::string_list:
    case FieldType::integer_list:
    case FieldType::float_list:
      return to_list(field, node);
    case FieldType::param_map:
    case FieldType::string_map:
      return to_map(field, node);
    case FieldType::param_value:
      return to_param_value(field, std::string(field.path), node);
    default:
      return to_scalar(field, field.type, std::string(field.path), node);
  }
}

tl::expected<nlohmann::json, ConversionError> convert_entry(const Field& map, const std::string& name,
                                                            const YamlNode& node) {
  const std::string label = std::string(map.path) + "." + name;
  if (map.type == FieldType::string_map) {
    if (!valid_env_name(name)) {
      return refuse(node, fmt::format("{} is not a valid environment variable name: use letters, digits and '_', "
                                      "not starting with a digit",
                                      util::quoted(name)));
    }
    return to_string(label, node);
  }
  if (!valid_entry_name(name)) {
    return refuse(node, fmt::format("{} is not a valid parameter name: use 1 to 128 letters, digits, '_' or '-', not "
                                    "starting with a digit",
                                    util::quoted(name)));
  }
  return to_param_value(map_entry_field(map), label, node);
}

tl::expected<nlohmann::json, ConversionError> convert_integer(const Field& field, std::int64_t value,
                                                              const std::string& label) {
  EXPCTL_ASSERT(field.type == FieldType::integer, "{} is not an integer field", field.path);
  if (const auto problem = range_problem(field.range, static_cast<double>(value))) {
    return tl::unexpected<ConversionError>(
        ConversionError{{}, fmt::format("{} must be {}, found {}", label, *problem, value)});
  }
  return value;
}

nlohmann::json default_value(const Field& field) {
  const YamlDocument document = load_yaml(field.default_yaml, "default");
  EXPCTL_ASSERT(document.diagnostics.empty() && !document.empty, "default of {} is not YAML", field.path);
  auto value = convert_value(field, document.root);
  EXPCTL_ASSERT(value.has_value(), "default of {} is invalid: {}", field.path, value ? "" : value.error().message);
  return *value;
}

}  // namespace expctl::spec
