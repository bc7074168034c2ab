#include "expctl/spec/program.hpp"

#include <glob.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "expctl/spec/canonical.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/file_digest.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::spec {

namespace fs = std::filesystem;

namespace {

// One piece of an argument: literal text, or a placeholder's name ("seed", "params.lr").
struct Piece {
  bool placeholder = false;
  std::string text;
};

// Splits an argument into literal text and placeholders; an error names an unbalanced brace.
tl::expected<std::vector<Piece>, std::string> pieces_of(std::string_view argument) {
  std::vector<Piece> pieces;
  std::string literal;
  for (size_t i = 0; i < argument.size(); ++i) {
    const char c = argument[i];
    if ((c == '{' || c == '}') && i + 1 < argument.size() && argument[i + 1] == c) {
      literal += c;  // "{{" and "}}" are literal braces
      ++i;
      continue;
    }
    if (c == '}') {
      return tl::unexpected(std::string("a lone \"}\": write \"}}\" for a literal brace"));
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    const size_t close = argument.find('}', i + 1);
    if (close == std::string_view::npos) {
      return tl::unexpected(std::string("a \"{\" without its \"}\": write \"{{\" for a literal brace"));
    }
    if (!literal.empty()) {
      pieces.push_back({false, std::move(literal)});
      literal.clear();
    }
    pieces.push_back({true, std::string(argument.substr(i + 1, close - i - 1))});
    i = close;
  }
  if (!literal.empty()) {
    pieces.push_back({false, std::move(literal)});
  }
  return pieces;
}

constexpr std::string_view k_params_prefix = "params.";

std::string param_text(const nlohmann::json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  return canonical_json(value);  // 64, 64.0, 0.1, true, [1,2]
}

std::string relative_name(const fs::path& path, const fs::path& spec_dir) {
  return path.lexically_normal().lexically_relative(spec_dir.lexically_normal()).generic_string();
}

bool is_glob(std::string_view pattern) {
  return pattern.find_first_of("*?[") != std::string_view::npos;
}

tl::expected<std::vector<fs::path>, std::string> expand(const fs::path& spec_dir, const std::string& pattern) {
  const fs::path full = fs::path(pattern).is_absolute() ? fs::path(pattern) : spec_dir / pattern;
  if (!is_glob(pattern)) {
    std::error_code error;
    if (!fs::is_regular_file(full, error)) {
      return tl::unexpected(fmt::format("program.files: {} is not a file (looked for {}; paths are relative to the "
                                        "spec's directory)",
                                        util::quoted(pattern), full.lexically_normal().string()));
    }
    return std::vector<fs::path>{full};
  }
  glob_t matches{};
  const int rc = ::glob(full.c_str(), GLOB_MARK, nullptr, &matches);
  std::vector<fs::path> found;
  for (size_t i = 0; rc == 0 && i < matches.gl_pathc; ++i) {
    const std::string match = matches.gl_pathv[i];
    if (!match.empty() && match.back() != '/') {  // GLOB_MARK: directories end in '/'
      found.emplace_back(match);
    }
  }
  ::globfree(&matches);
  if (found.empty()) {
    return tl::unexpected(fmt::format("program.files: the glob {} matches no file in {}", util::quoted(pattern),
                                      full.parent_path().lexically_normal().string()));
  }
  return found;
}

// The script a command names: its first relative argument that is a file beside the spec
// (`python3 train.py`, `./train.sh`). Absolute paths are the system's (the fingerprint's business).
std::optional<fs::path> default_script(const fs::path& spec_dir, const std::vector<std::string>& command) {
  for (const std::string& argument : command) {
    if (argument.empty() || argument.find('{') != std::string::npos || fs::path(argument).is_absolute()) {
      continue;
    }
    std::error_code error;
    if (fs::is_regular_file(spec_dir / argument, error)) {
      return spec_dir / argument;
    }
  }
  return std::nullopt;
}

}  // namespace

bool is_script_name(std::string_view name) {
  static constexpr std::string_view k_script_extensions[] = {".py", ".sh", ".bash", ".ipynb",
                                                             ".pl", ".rb", ".js",   ".jl"};
  const std::string extension = fs::path(name).extension().string();
  return std::find(std::begin(k_script_extensions), std::end(k_script_extensions), extension) !=
         std::end(k_script_extensions);
}

std::optional<std::string> missing_script(std::string_view argument, std::size_t index, const fs::path& workdir) {
  if (argument.empty() || argument.starts_with('-') || argument.find('{') != std::string_view::npos ||
      fs::path(argument).is_absolute()) {
    return std::nullopt;
  }
  const bool names_file = index == 0 ? argument.find('/') != std::string_view::npos : is_script_name(argument);
  std::error_code error;
  if (!names_file || fs::is_regular_file(workdir / argument, error)) {
    return std::nullopt;
  }
  return fmt::format(
      "{} is not a file (looked for {}; relative paths are taken from program.workdir, by default "
      "the spec's directory): check the name",
      util::quoted(argument), (workdir / argument).lexically_normal().string());
}

bool has_program(const nlohmann::json& values) {
  const auto program = values.find("program");
  return program != values.end() && program->contains("command") && !program->at("command").empty();
}

bool is_trainer_setting(std::string_view path) {
  const std::string_view section = path.substr(0, path.find('.'));
  return std::find(std::begin(k_trainer_sections), std::end(k_trainer_sections), section) !=
             std::end(k_trainer_sections) ||
         std::find(std::begin(k_trainer_fields), std::end(k_trainer_fields), path) != std::end(k_trainer_fields);
}

bool applies(const nlohmann::json& values, std::string_view path) {
  return !has_program(values) || !is_trainer_setting(path);
}

nlohmann::json applicable_values(nlohmann::json values) {
  if (!values.is_object() || !has_program(values)) {
    return values;
  }
  for (const std::string_view section : k_trainer_sections) {
    values.erase(std::string(section));
  }
  for (const std::string_view field : k_trainer_fields) {
    const size_t dot = field.find('.');
    const auto section = values.find(std::string(field.substr(0, dot)));
    if (section != values.end() && section->is_object()) {
      section->erase(std::string(field.substr(dot + 1)));
    }
  }
  return values;
}

std::optional<std::string> placeholder_problem(std::string_view argument, const nlohmann::json& params) {
  const auto pieces = pieces_of(argument);
  if (!pieces) {
    return pieces.error();
  }
  for (const Piece& piece : *pieces) {
    if (!piece.placeholder || piece.text == "seed" || piece.text == "run_id") {
      continue;
    }
    if (piece.text.starts_with(k_params_prefix)) {
      const std::string name = piece.text.substr(k_params_prefix.size());
      if (params.is_object() && params.contains(name)) {
        continue;
      }
      std::vector<std::string> names;
      for (const auto& [key, value] : params.items()) {
        names.push_back(key);
      }
      const auto suggestion = util::closest_match(name, names);
      return fmt::format(
          "placeholder {} names no parameter in program.params ({}){}: declare it there, e.g. "
          "params: {{{}: ...}}",
          util::quoted("{" + piece.text + "}"), names.empty() ? "none declared" : util::join(names, ", "),
          suggestion ? fmt::format(" (did you mean {}?)", util::quoted("{params." + *suggestion + "}")) : "", name);
    }
    std::string message = fmt::format("unknown placeholder {}: use {{params.NAME}}, {{seed}} or {{run_id}} "
                                      "(write {{{{ and }}}} for literal braces)",
                                      util::quoted("{" + piece.text + "}"));
    return message;
  }
  return std::nullopt;
}

std::string substitute_placeholders(std::string_view argument, const PlaceholderValues& values) {
  const auto pieces = pieces_of(argument);
  EXPCTL_ASSERT(pieces.has_value(), "unchecked program argument {}", argument);
  std::string out;
  for (const Piece& piece : *pieces) {
    if (!piece.placeholder) {
      out += piece.text;
    } else if (piece.text == "seed") {
      out += std::to_string(values.seed);
    } else if (piece.text == "run_id") {
      out += values.run_id;
    } else {
      const std::string name = piece.text.substr(k_params_prefix.size());
      EXPCTL_ASSERT(piece.text.starts_with(k_params_prefix) && values.params.contains(name),
                    "unchecked placeholder {}", piece.text);
      out += param_text(values.params.at(name));
    }
  }
  return out;
}

tl::expected<std::vector<ProgramFile>, std::string> program_files(const fs::path& spec_dir,
                                                                  const std::vector<std::string>& files,
                                                                  const std::vector<std::string>& command) {
  std::set<fs::path> paths;
  if (files.empty()) {
    if (const auto script = default_script(spec_dir, command)) {
      paths.insert(*script);
    }
  }
  for (const std::string& pattern : files) {
    auto expanded = expand(spec_dir, pattern);
    if (!expanded) {
      return tl::unexpected(expanded.error());
    }
    paths.insert(expanded->begin(), expanded->end());
  }
  std::vector<ProgramFile> out;
  for (const fs::path& path : paths) {
    // Remembered under path, size, mtime and inode: an unchanged script or model file is read once.
    auto digest = util::file_digest(path);
    if (!digest) {
      return tl::unexpected(fmt::format("program.files: cannot read {}: {}", path.string(), digest.error().message));
    }
    out.push_back({relative_name(path, spec_dir), std::move(*digest)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

tl::expected<std::vector<ProgramInput>, std::string> program_inputs(const fs::path& spec_dir,
                                                                    const std::vector<std::string>& inputs) {
  std::vector<ProgramInput> out;
  for (const std::string& input : inputs) {
    const fs::path path = (fs::path(input).is_absolute() ? fs::path(input) : spec_dir / input).lexically_normal();
    std::error_code error;
    util::Expected<std::string> digest = util::make_error("");
    if (fs::is_regular_file(path, error)) {
      digest = util::file_digest(path);
    } else if (fs::is_directory(path, error)) {
      digest = util::folder_digest(path);
    } else {
      return tl::unexpected(
          fmt::format("program.inputs: {} is neither a file nor a folder (looked for {}; paths are "
                      "relative to the spec's directory)",
                      util::quoted(input), path.string()));
    }
    if (!digest) {
      return tl::unexpected(fmt::format("program.inputs: cannot read {}: {}", path.string(), digest.error().message));
    }
    out.push_back({relative_name(path, spec_dir), path, std::move(*digest)});
  }
  return out;
}

}  // namespace expctl::spec
