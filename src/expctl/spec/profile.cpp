#include "expctl/spec/profile.hpp"

#include <sstream>

#include <fmt/format.h>

#include "expctl/spec/yaml_tree.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/toml.hpp"
#include "expctl/util/toml_depth.hpp"

namespace expctl::spec {

namespace fs = std::filesystem;

namespace {

// Profiles are a few dozen lines; the cap only stops a wrong path (a dataset, /dev/zero) from
// being read whole.
constexpr size_t k_max_profile_bytes = size_t{1024} * 1024;

template <typename T>
std::string toml_text(const T& value) {
  std::ostringstream stream;
  stream << value;
  return stream.str();
}

nlohmann::json to_json(const toml::node& node);

// Recursive, as deep as the profile: load_profile has bounded that (util/toml_depth.hpp and
// TOML_MAX_NESTED_VALUES).
nlohmann::json table_to_json(const toml::table& table) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : table) {
    out[std::string(key.str())] = to_json(value);
  }
  return out;
}

nlohmann::json to_json(const toml::node& node) {
  if (const auto* table = node.as_table()) {
    return table_to_json(*table);
  }
  if (const auto* array = node.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const toml::node& item : *array) {
      out.push_back(to_json(item));
    }
    return out;
  }
  if (const auto* text = node.as_string()) {
    return text->get();
  }
  if (const auto* integer = node.as_integer()) {
    return integer->get();
  }
  if (const auto* floating = node.as_floating_point()) {
    return floating->get();
  }
  if (const auto* boolean = node.as_boolean()) {
    return boolean->get();
  }
  if (const auto* date = node.as_date()) {
    return toml_text(date->get());
  }
  if (const auto* time = node.as_time()) {
    return toml_text(time->get());
  }
  if (const auto* date_time = node.as_date_time()) {
    return toml_text(date_time->get());
  }
  return nullptr;
}

util::Diagnostic problem(const std::string& name, std::string message) {
  return util::Diagnostic{name, 0, 0, std::move(message), ""};
}

}  // namespace

std::optional<fs::path> resolve_profile_path(const fs::path& spec_file, const fs::path& env) {
  std::error_code error;
  if (env.is_absolute()) {
    return fs::is_regular_file(env, error) ? std::optional(env.lexically_normal()) : std::nullopt;
  }
  fs::path directory = fs::absolute(spec_file, error).parent_path();
  while (!directory.empty()) {
    const fs::path candidate = (directory / env).lexically_normal();
    if (fs::is_regular_file(candidate, error)) {
      return candidate;
    }
    if (directory == directory.root_path()) {
      break;
    }
    directory = directory.parent_path();
  }
  return std::nullopt;
}

tl::expected<nlohmann::json, util::Diagnostic> load_profile(const fs::path& path, const std::string& display_name) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (!error && size > k_max_profile_bytes) {
    return tl::unexpected(
        problem(display_name, fmt::format("the profile is {} bytes, more than the 1 MiB limit", size)));
  }
  auto text = util::read_file(path);
  if (!text) {
    return tl::unexpected(problem(display_name, text.error().message));
  }
  if (auto deep = util::toml_key_depth_problem(*text); !deep.empty()) {
    return tl::unexpected(problem(display_name, std::move(deep)));
  }
  try {
    const toml::table table = toml::parse(*text, display_name);
    return table_to_json(table);
  } catch (const toml::parse_error& e) {
    const int line = static_cast<int>(e.source().begin.line);
    const int column = static_cast<int>(e.source().begin.column);
    return tl::unexpected(util::Diagnostic{
        display_name, line, column, "TOML syntax error: " + std::string(e.description()), printable_line(*text, line)});
  }
}

std::string display_path(const fs::path& path) {
  std::error_code error;
  const fs::path relative = path.lexically_proximate(fs::current_path(error));
  std::string text = relative.string();
  if (text.empty() || util::starts_with(text, "..")) {
    return path.string();
  }
  return text;
}

}  // namespace expctl::spec
