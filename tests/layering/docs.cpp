#include "docs.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace expctl::test::layering {

namespace {

/// The lines of the first ``` block after `heading`; empty when there is none.
std::vector<std::string> fenced_block_after(std::string_view text, std::string_view heading) {
  const size_t at = text.find(heading);
  if (at == std::string_view::npos) {
    return {};
  }
  std::istringstream in{std::string(text.substr(at))};
  std::vector<std::string> lines;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("```")) {
      if (inside) {
        return lines;
      }
      inside = true;
    } else if (inside) {
      lines.push_back(line);
    }
  }
  return {};
}

/// The module names in a list such as "spec, env store": words without a '.'.
std::set<std::string> names(const std::string& text) {
  std::set<std::string> result;
  static const std::regex word(R"([A-Za-z0-9_.]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), word); it != std::sregex_iterator(); ++it) {
    const std::string name = it->str();
    if (name.find('.') == std::string::npos) {
      result.insert(name);
    }
  }
  return result;
}

}  // namespace

ModuleDeps parse_diagram(std::string_view architecture_md) {
  const auto lines = fenced_block_after(architecture_md, "## Dependency direction");
  if (lines.empty()) {
    throw std::runtime_error("ARCHITECTURE.md has no fenced diagram after \"## Dependency direction\"");
  }
  ModuleDeps diagram;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = lines[i].substr(0, lines[i].find('('));  // "(...)" comments the line
    if (line.find_first_not_of(" \t") == std::string::npos) {
      continue;
    }
    const size_t arrow = line.find("->");
    if (arrow == std::string::npos) {
      throw std::runtime_error("ARCHITECTURE.md's diagram, line " + std::to_string(i + 1) +
                               " has no \"->\": " + lines[i]);
    }
    const std::set<std::string> to = names(line.substr(arrow + 2));
    for (const std::string& from : names(line.substr(0, arrow))) {
      diagram[from].insert(to.begin(), to.end());
    }
    for (const std::string& module : to) {
      diagram[module];  // a module that links nothing is in the diagram too
    }
  }
  return diagram;
}

ModuleDeps reachable(const ModuleDeps& diagram) {
  ModuleDeps result;
  for (const auto& [module, links] : diagram) {
    std::set<std::string>& seen = result[module];
    std::vector<std::string> queue(links.begin(), links.end());
    while (!queue.empty()) {
      const std::string next = queue.back();
      queue.pop_back();
      if (!seen.insert(next).second) {
        continue;
      }
      if (const auto it = diagram.find(next); it != diagram.end()) {
        queue.insert(queue.end(), it->second.begin(), it->second.end());
      }
    }
  }
  return result;
}

std::set<std::string> table_modules(std::string_view architecture_md) {
  std::set<std::string> modules;
  static const std::regex row(R"(^\| `([a-z_]+)` \|)");
  std::istringstream in{std::string(architecture_md)};
  for (std::string line; std::getline(in, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) {
      modules.insert(match[1]);
    }
  }
  return modules;
}

std::vector<std::string> diagram_problems(const ModuleDeps& diagram, const ModuleDeps& build) {
  const ModuleDeps paths = reachable(diagram);
  std::vector<std::string> problems;
  for (const auto& [module, includes] : build) {
    const auto it = paths.find(module);
    if (it == paths.end()) {
      problems.push_back("module " + module +
                         " is built (module-deps.txt) but not in ARCHITECTURE.md's dependency "
                         "diagram: add a line `" +
                         module + " -> ...` for the modules it links");
      continue;
    }
    for (const std::string& dep : includes) {
      if (!it->second.contains(dep)) {
        problems.push_back("expctl_" + module + " links " + dep +
                           " (module-deps.txt), but ARCHITECTURE.md's "
                           "dependency diagram has no path from " +
                           module + " to " + dep + ": add `" + module + " -> " + dep +
                           "` to the diagram if the dependency direction allows it, or drop the link");
      }
    }
    for (const std::string& dep : it->second) {
      if (build.contains(dep) && !includes.contains(dep)) {
        problems.push_back("ARCHITECTURE.md's dependency diagram gives " + module + " a path to " + dep +
                           ", but expctl_" + module + " does not link it (module-deps.txt): correct the diagram");
      }
    }
  }
  return problems;
}

std::set<std::string> readme_layout_modules(std::string_view readme_md) {
  for (const std::string& line : fenced_block_after(readme_md, "## Layout")) {
    if (line.starts_with("src/expctl/")) {
      const size_t colon = line.find(':');
      const std::string list = line.substr(colon == std::string::npos ? 0 : colon + 1);
      return names(list.substr(0, list.find('(')));
    }
  }
  return {};
}

std::vector<std::string> quick_start_commands(std::string_view readme_md) {
  std::vector<std::string> commands;
  for (const std::string& line : fenced_block_after(readme_md, "## Quick start")) {
    const size_t start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line[start] != '#') {
      commands.push_back(line.substr(start));
    }
  }
  return commands;
}

std::vector<SourceLine> grep_sources(const std::filesystem::path& root, const std::string& pattern) {
  const std::regex expression(pattern);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "src")) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() && (extension == ".cpp" || extension == ".hpp" || extension == ".h")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<SourceLine> matches;
  for (const auto& path : files) {
    std::ifstream in(path);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (std::regex_search(line, expression)) {
        matches.push_back({std::filesystem::relative(path, root).generic_string(), number});
      }
    }
  }
  return matches;
}

std::set<std::string> files_of(const std::vector<SourceLine>& matches) {
  std::set<std::string> files;
  for (const SourceLine& match : matches) {
    files.insert(match.file);
  }
  return files;
}

}  // namespace expctl::test::layering
