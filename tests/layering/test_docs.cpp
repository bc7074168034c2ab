// The map is tested against the build: ARCHITECTURE.md's dependency diagram and module table and
// README's layout must name what module-deps.txt (written by the build) says. A new link fails
// here until the diagram says it; a new module fails until it has a diagram line, a table row
// and a place in the README's layout.
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "docs.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace expctl::test::layering;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string lines(const std::vector<std::string>& items) {
  return std::accumulate(items.begin(), items.end(), std::string(),
                         [](std::string all, const std::string& item) { return all + item + "\n"; });
}

std::string architecture() {
  return read_text(expctl::test::source_dir() / "ARCHITECTURE.md");
}

}  // namespace

TEST_CASE("docs: ARCHITECTURE.md's dependency diagram is the build's link graph") {
  const ModuleDeps build = read_module_deps(EXPCTL_MODULE_DEPS_FILE);
  const ModuleDeps diagram = parse_diagram(architecture());
  for (const auto& [module, links] : diagram) {
    if (!build.contains(module)) {
      WARN("not checked: this build has no target expctl_" << module);
    }
  }
  const auto problems = diagram_problems(diagram, build);
  INFO("ARCHITECTURE.md against module-deps.txt:\n" << lines(problems));
  CHECK(problems.empty());
}

TEST_CASE("docs: ARCHITECTURE.md's module table has one row per module of the diagram and of the build") {
  const std::string text = architecture();
  const std::set<std::string> table = table_modules(text);
  for (const auto& [module, links] : read_module_deps(EXPCTL_MODULE_DEPS_FILE)) {
    CAPTURE(module);
    CHECK(table.contains(module));
  }
  std::set<std::string> drawn;
  for (const auto& [module, links] : parse_diagram(text)) {
    drawn.insert(module);
  }
  CHECK(table == drawn);
}

TEST_CASE("docs: README's layout names every module of the build and every page under docs/") {
  const std::string readme = read_text(expctl::test::source_dir() / "README.md");
  const std::set<std::string> listed = readme_layout_modules(readme);
  for (const auto& [module, links] : read_module_deps(EXPCTL_MODULE_DEPS_FILE)) {
    CAPTURE(module);
    CHECK(listed.contains(module));
  }
  const std::string layout = readme.substr(readme.find("## Layout"));
  for (const auto& entry : std::filesystem::directory_iterator(expctl::test::source_dir() / "docs")) {
    if (entry.path().extension() == ".md") {
      const std::string name = entry.path().filename().string();
      CAPTURE(name);
      CHECK(layout.find(name) != std::string::npos);
    }
  }
}

TEST_CASE("docs: a link the diagram does not draw is reported with its fix, and so is a path the build lacks") {
  const std::string text =
      "# x\n## Dependency direction\n\n```\nspec, store  ->  util      (the base)\ncompare  ->  spec\n"
      "main.cpp -> compare\n```\n";
  const ModuleDeps diagram = parse_diagram(text);
  CHECK(diagram.at("compare") == std::set<std::string>{"spec"});
  CHECK_FALSE(diagram.contains("main.cpp"));
  CHECK(reachable(diagram).at("compare") == std::set<std::string>{"spec", "util"});

  const ModuleDeps agrees = parse_module_deps("util:\nspec: util\nstore: util\ncompare: spec util\n");
  CHECK(diagram_problems(diagram, agrees).empty());

  // compare now links store: a new link, which the diagram does not say.
  const ModuleDeps linked = parse_module_deps("util:\nspec: util\nstore: util\ncompare: spec store util\n");
  const auto problems = diagram_problems(diagram, linked);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::StartsWith("expctl_compare links store (module-deps.txt), but ARCHITECTURE.md's "
                                            "dependency diagram has no path from compare to store: add `compare -> "
                                            "store`"));

  // A module the build has and the diagram lacks, and a path the build does not link.
  const ModuleDeps other = parse_module_deps("util:\nspec:\nstore: util\ncompare: spec util\nserve: util\n");
  const auto more = diagram_problems(diagram, other);
  REQUIRE(more.size() == 2);
  CHECK_THAT(lines(more), Catch::Contains("module serve is built (module-deps.txt) but not in ARCHITECTURE.md"));
  CHECK_THAT(lines(more), Catch::Contains("gives spec a path to util, but expctl_spec does not link it"));

  CHECK_THROWS_WITH(parse_diagram("## Dependency direction\n```\nspec util\n```\n"),
                    Catch::Contains("line 1 has no \"->\""));
  CHECK(table_modules("| module | owns |\n|---|---|\n| `util` | errors |\n| `run` | runs |\n") ==
        std::set<std::string>{"util", "run"});
  CHECK(readme_layout_modules("## Layout\n```\nsrc/expctl/   libraries: util, run (see X.md)\n```\n") ==
        std::set<std::string>{"util", "run"});
}

TEST_CASE("docs: README's set-up commands need no sudo, so they run as root where there is none") {
  // A fresh container or CI image runs as root and has no sudo: `sudo scripts/bootstrap.sh`
  // failed there at once. The scripts ask for root themselves, through sudo only when not root
  // (scripts/bootstrap.sh; test_bootstrap.sh runs it both ways).
  const std::string readme = read_text(expctl::test::source_dir() / "README.md");
  const std::vector<std::string> commands = quick_start_commands(readme);
  REQUIRE(commands.size() >= 2);
  CHECK(commands.front() == "scripts/bootstrap.sh");
  for (const std::string& command : commands) {
    CAPTURE(command);
    CHECK_FALSE(command.starts_with("sudo "));
    CHECK(command.find(" sudo ") == std::string::npos);
  }
  CHECK(quick_start_commands("## Quick start\n\n```sh\n# install\nsudo x.sh  \n\n  y.sh\n```\nz.sh\n") ==
        std::vector<std::string>{"sudo x.sh  ", "y.sh"});
}

TEST_CASE("docs: the torchfree preset builds every module's unit tests but train's, and runs them") {
  // docs/contributing.md, "Without LibTorch": the preset is what proves the split, so a module
  // whose tests it leaves out is a module nobody builds without LibTorch.
  const auto presets = nlohmann::json::parse(read_text(expctl::test::source_dir() / "CMakePresets.json"));
  const auto named = [&](const char* kind) {
    for (const auto& preset : presets.at(kind)) {
      if (preset.at("name") == "torchfree") {
        return preset;
      }
    }
    FAIL("CMakePresets.json has no " << kind << " named torchfree");
    return nlohmann::json();
  };
  const auto configure = named("configurePresets");
  CHECK(configure.at("cacheVariables").at("EXPCTL_WITH_TORCH") == "OFF");
  std::set<std::string> targets;
  const auto build = named("buildPresets");
  for (const auto& target : build.at("targets")) {
    targets.insert(target.get<std::string>());
  }
  CHECK(targets.contains("test_layering"));
  for (const auto& entry : std::filesystem::directory_iterator(expctl::test::source_dir() / "tests/unit")) {
    const std::string module = entry.path().filename().string();
    if (entry.is_directory() && module != "train") {
      CAPTURE(module);
      CHECK(targets.contains("test_" + module));
    }
  }
  CHECK(named("testPresets").at("configurePreset") == "torchfree");
}
