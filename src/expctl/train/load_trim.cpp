#include "expctl/train/load_trim.hpp"

#include <algorithm>
#include <cstdlib>
#include <istream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/train/plugin_api.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"

namespace expctl::train::trim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Why the analysis no longer holds for this process, or "" when it does.
std::string stale_because(const Manifest& manifest) {
  if (manifest.build_id != plugin::build_id()) {
    return "it comes from another build";
  }
  if (environment("LD_LIBRARY_PATH") != manifest.ld_library_path) {
    return "LD_LIBRARY_PATH differs from the build's";
  }
  if (!environment("LD_PRELOAD").empty()) {
    return "LD_PRELOAD is set";
  }
  for (const auto& [path, identity] : manifest.kept) {
    if (util::file_identity(path) != identity) {
      return fmt::format("{} changed since the build (rebuild expctl to trim again)", path);
    }
  }
  return "";
}

// "binding file A [0] to B [0]: normal symbol `S' [V]" -> {A, B, S}.
std::optional<Binding> parse_binding(const std::string& line) {
  constexpr std::string_view k_from = "binding file ";
  constexpr std::string_view k_to = "] to ";
  const auto from = line.find(k_from);
  const auto to = line.find(k_to, from);
  const auto symbol = line.find('`', to);
  const auto end = line.find('\'', symbol);
  if (from == std::string::npos || to == std::string::npos || symbol == std::string::npos ||
      end == std::string::npos) {
    return std::nullopt;
  }
  const auto name_of = [&line](size_t begin, size_t stop) {
    return line.substr(begin, line.rfind(" [", stop) - begin);
  };
  return Binding{name_of(from + k_from.size(), to), name_of(to + k_to.size(), symbol),
                 line.substr(symbol + 1, end - symbol - 1)};
}

bool answers_to(const Object& object, const std::string& name) {
  return object.soname == name || fs::path(object.path).filename() == name;
}

}  // namespace

std::string format_manifest(const Manifest& manifest) {
  const json document = {{"build_id", manifest.build_id},
                         {"ld_library_path", manifest.ld_library_path},
                         {"kept", manifest.kept},
                         {"stubs", manifest.stubs}};
  return document.dump(1) + "\n";
}

std::optional<Manifest> parse_manifest(const std::string& text) {
  const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    return Manifest{document.at("build_id").get<std::string>(), document.at("ld_library_path").get<std::string>(),
                    document.at("kept").get<std::map<std::string, std::string>>(),
                    document.at("stubs").get<std::vector<std::string>>()};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

fs::path stub_directory(const fs::path& plugin) { return plugin.parent_path() / "torch-stubs"; }

Plan plan(const fs::path& plugin) {
  if (const auto value = environment("EXPCTL_TORCH_TRIM"); value == "off" || value == "0" || value == "no" ||
                                                           value == "false") {
    return {{}, "EXPCTL_TORCH_TRIM=" + value};
  }
  const fs::path file = stub_directory(plugin) / "manifest.json";
  const auto text = util::read_file(file);
  if (!text) {
    return {};  // a build without the analysis (EXPCTL_TRIM_TORCH_LOAD=OFF)
  }
  const auto manifest = parse_manifest(*text);
  if (!manifest) {
    return {{}, fmt::format("{} is not a manifest", file.string())};
  }
  if (auto because = stale_because(*manifest); !because.empty()) {
    return {{}, "its analysis is stale: " + because};
  }
  Plan trimmed;
  for (const auto& soname : manifest->stubs) {
    trimmed.stubs.push_back(stub_directory(plugin) / soname);
  }
  return trimmed;
}

std::set<Binding> parse_bindings(std::istream& trace) {
  std::set<Binding> bindings;
  for (std::string line; std::getline(trace, line);) {
    if (auto binding = parse_binding(line)) {
      bindings.insert(std::move(*binding));
    }
  }
  return bindings;
}

std::set<std::string> bound_closure(const std::set<Binding>& bindings, const std::set<std::string>& roots,
                                    const IsVague& is_vague) {
  std::set<std::string> kept = roots;
  for (size_t before = 0; before != kept.size();) {
    before = kept.size();
    for (const auto& binding : bindings) {
      if (kept.contains(binding.from) && !kept.contains(binding.to) && !is_vague(binding)) {
        kept.insert(binding.to);
      }
    }
  }
  return kept;
}

Manifest make_manifest(const std::vector<Object>& objects, const std::set<Binding>& bindings,
                       const std::set<std::string>& roots, const IsVague& is_vague) {
  const auto kept = bound_closure(bindings, roots, is_vague);
  Manifest manifest{plugin::build_id(), environment("LD_LIBRARY_PATH"), {}, {}};
  std::set<std::string> needed;
  for (const auto& object : objects) {
    if (kept.contains(object.path)) {
      needed.insert(object.needed.begin(), object.needed.end());
      if (!roots.contains(object.path) && !object.identity.empty()) {
        manifest.kept[object.path] = object.identity;  // the roots are checked by the build id
      }
    }
  }
  for (const auto& name : needed) {
    const bool provided = std::any_of(objects.begin(), objects.end(), [&](const Object& object) {
      return kept.contains(object.path) && answers_to(object, name);
    });
    if (!provided) {
      manifest.stubs.push_back(name);
    }
  }
  return manifest;
}

std::optional<std::string> first_difference(const std::set<Binding>& whole, const std::set<Binding>& trimmed,
                                            const std::set<std::string>& objects, const IsVague& is_vague) {
  const auto by_user = [&objects](const std::set<Binding>& bindings) {
    std::map<std::pair<std::string, std::string>, const Binding*> found;
    for (const auto& binding : bindings) {
      if (objects.contains(binding.from)) {
        found.emplace(std::pair(binding.from, binding.symbol), &binding);
      }
    }
    return found;
  };
  const auto before = by_user(whole);
  const auto after = by_user(trimmed);
  for (const auto& [use, binding] : before) {
    const auto other = after.find(use);
    if (other == after.end()) {
      return fmt::format("{} takes {} from {}, and from nothing when trimmed", use.first, use.second, binding->to);
    }
    if (binding->to != other->second->to && !(is_vague(*binding) && is_vague(*other->second))) {
      return fmt::format("{} takes {} from {}, and from {} when trimmed", use.first, use.second, binding->to,
                         other->second->to);
    }
  }
  for (const auto& [use, binding] : after) {
    if (!before.contains(use)) {
      return fmt::format("{} takes {} from {} only when trimmed", use.first, use.second, binding->to);
    }
  }
  return std::nullopt;
}

}  // namespace expctl::train::trim
