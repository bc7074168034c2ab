#pragma once
/// The layering checker behind test_layering: which modules each module may include (from the
/// build's module-deps.txt) held against the #include lines of every file under src/expctl/.

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::test::layering {

/// Module -> the other modules whose headers it may include.
using ModuleDeps = std::map<std::string, std::set<std::string>>;

/// Parses module-deps.txt: "module: dep dep ..." per line, '#' starts a comment line.
/// Throws std::runtime_error naming the line when one has no ':'.
ModuleDeps parse_module_deps(std::string_view text);

/// Reads and parses the file; throws std::runtime_error when it cannot be read.
ModuleDeps read_module_deps(const std::filesystem::path& path);

struct Include {
  int line;            ///< 1-based
  std::string module;  ///< "store" for expctl/store/store.hpp
  std::string header;  ///< "expctl/store/store.hpp"
};

/// The #include "expctl/<module>/..." (or <...>) directives of a source text.
std::vector<Include> expctl_includes(std::string_view text);

struct Report {
  /// "src/expctl/env/foo.cpp:12 includes expctl/store/store.hpp but expctl_env does not link ..."
  std::vector<std::string> violations;
  /// Modules with a directory or an include but no target in this build: not checked.
  std::set<std::string> unchecked;
};

/// Checks every C++ file under `root`/src/expctl/<module>/ against `deps`; paths in the report
/// are relative to `root`.
Report check_tree(const std::filesystem::path& root, const ModuleDeps& deps);

}  // namespace expctl::test::layering
