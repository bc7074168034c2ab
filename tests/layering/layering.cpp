#include "layering.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace expctl::test::layering {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  const size_t end = text.find_last_not_of(" \t\r");
  return begin == std::string_view::npos ? std::string() : std::string(text.substr(begin, end - begin + 1));
}

std::set<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::set<std::string> result;
  for (std::string word; in >> word;) {
    result.insert(word);
  }
  return result;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

bool is_cpp_file(const fs::path& path) {
  static const std::set<std::string> extensions{".cpp", ".cc", ".cxx", ".hpp", ".h", ".hh", ".hxx", ".inc", ".ipp"};
  return extensions.contains(path.extension().string());
}

/// Every C++ file in a module folder (src/expctl/<module>/...), relative to `root`, sorted.
std::vector<fs::path> module_files(const fs::path& root) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(root / "src" / "expctl")) {
    const fs::path relative = entry.path().lexically_relative(root);
    if (entry.is_regular_file() && is_cpp_file(relative) && std::distance(relative.begin(), relative.end()) > 3) {
      files.push_back(relative);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// "env" for src/expctl/env/foo.cpp.
std::string module_of(const fs::path& relative) {
  return std::next(relative.begin(), 2)->string();
}

std::string violation(const fs::path& file, const std::string& module, const Include& include) {
  return file.generic_string() + ":" + std::to_string(include.line) + " includes " + include.header +
         " but expctl_" + module + " does not link expctl::" + include.module + ": link it in src/expctl/" +
         module + "/CMakeLists.txt if ARCHITECTURE.md's dependency direction allows, or drop the include";
}

void check_file(const fs::path& root, const fs::path& file, const ModuleDeps& deps, Report& report) {
  const std::string module = module_of(file);
  const auto allowed = deps.find(module);
  if (allowed == deps.end()) {
    report.unchecked.insert(module);
    return;
  }
  for (const Include& include : expctl_includes(file_text(root / file))) {
    if (include.module == module || allowed->second.contains(include.module)) {
      continue;
    }
    if (!deps.contains(include.module)) {
      report.unchecked.insert(include.module);
      continue;
    }
    report.violations.push_back(violation(file, module, include));
  }
}

}  // namespace

ModuleDeps parse_module_deps(std::string_view text) {
  ModuleDeps deps;
  std::istringstream in{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string content = trim(line);
    if (content.empty() || content.front() == '#') {
      continue;
    }
    const size_t colon = content.find(':');
    if (colon == std::string::npos) {
      throw std::runtime_error("module-deps.txt:" + std::to_string(number) +
                               ": expected \"module: dep dep ...\": configure the build again to rewrite it");
    }
    deps[trim(content.substr(0, colon))] = words(content.substr(colon + 1));
  }
  return deps;
}

ModuleDeps read_module_deps(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(path.string() +
                             ": cannot read the module graph: configure the build again "
                             "(cmake/ExpctlLayering.cmake writes it)");
  }
  return parse_module_deps(file_text(path));
}

std::vector<Include> expctl_includes(std::string_view text) {
  static const std::regex directive(R"(^\s*#\s*include\s*[<"](expctl/(\w+)/[^">]+)[">])");
  std::vector<Include> includes;
  std::istringstream in{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::smatch match;
    if (std::regex_search(line, match, directive)) {
      includes.push_back({number, match[2].str(), match[1].str()});
    }
  }
  return includes;
}

Report check_tree(const fs::path& root, const ModuleDeps& deps) {
  Report report;
  for (const fs::path& file : module_files(root)) {
    check_file(root, file, deps, report);
  }
  return report;
}

}  // namespace expctl::test::layering
