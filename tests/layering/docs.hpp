#pragma once
/// The map against the build: ARCHITECTURE.md's dependency diagram and module table, and README's
/// layout, held against module-deps.txt (what each module may include, from the build). Pure
/// functions over texts, so the checker's own tests can feed it a diagram that is wrong.

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "layering.hpp"

namespace expctl::test::layering {

/// The diagram: each module and the modules it links directly. Read from the first fenced block
/// after "## Dependency direction"; a line is `a, b -> c, d   (a comment)` (a and b link c and
/// d); names with a '.' (main.cpp) are not modules. Throws std::runtime_error naming the line
/// when one has no "->", or when there is no such block.
ModuleDeps parse_diagram(std::string_view architecture_md);

/// Every module the diagram reaches from each module, following its arrows.
ModuleDeps reachable(const ModuleDeps& diagram);

/// The first column of ARCHITECTURE.md's module table (| `module` | owns |).
std::set<std::string> table_modules(std::string_view architecture_md);

/// One line per difference between what the diagram lets each module reach and what the build
/// lets it include (module-deps.txt), each naming the fix; modules of the diagram this build has
/// no target for are skipped. Empty when they agree.
std::vector<std::string> diagram_problems(const ModuleDeps& diagram, const ModuleDeps& build);

/// The modules README's layout names on its `src/expctl/` line.
std::set<std::string> readme_layout_modules(std::string_view readme_md);

/// The commands of README's quick start: the lines of the first ``` block after "## Quick start",
/// without comments and blank lines.
std::vector<std::string> quick_start_commands(std::string_view readme_md);

/// One line of a source file.
struct SourceLine {
  std::string file;  ///< relative to the tree's root: "src/expctl/store/merge.cpp"
  int line = 0;      ///< 1-based
};

/// Every line of the C++ files (.cpp, .hpp, .h) under `root`/src that `pattern` (ECMAScript)
/// matches, in path order: what ARCHITECTURE.md's claims about where something is done are
/// held against.
std::vector<SourceLine> grep_sources(const std::filesystem::path& root, const std::string& pattern);

/// The files of `matches`, once each.
std::set<std::string> files_of(const std::vector<SourceLine>& matches);

}  // namespace expctl::test::layering
