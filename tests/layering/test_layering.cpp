// ARCHITECTURE.md's rule, enforced: a file under src/expctl/<module>/ includes only headers of
// its own module and of the modules expctl_<module> links (module-deps.txt, from the build).
#include <numeric>
#include <set>
#include <string>

#include "layering.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

using namespace expctl::test::layering;

namespace {

std::string lines(const std::vector<std::string>& items) {
  return std::accumulate(items.begin(), items.end(), std::string(),
                         [](std::string all, const std::string& item) { return all + item + "\n"; });
}

}  // namespace

TEST_CASE("layering: every module includes only its own headers and those of the modules it links") {
  const ModuleDeps deps = read_module_deps(EXPCTL_MODULE_DEPS_FILE);
  const Report report = check_tree(expctl::test::source_dir(), deps);
  for (const std::string& module : report.unchecked) {
    WARN("not checked: this build has no target expctl_" << module << " (its includes are compiled out here)");
  }
  INFO("includes that bypass the module graph of the build:\n" << lines(report.violations));
  CHECK(report.violations.empty());
}

TEST_CASE("layering: the build writes the module graph, util at the bottom and cli on top") {
  const ModuleDeps deps = read_module_deps(EXPCTL_MODULE_DEPS_FILE);
  REQUIRE(deps.contains("util"));
  REQUIRE(deps.contains("cli"));
  CHECK(deps.at("util").empty());
  for (const auto& [module, links] : deps) {
    CAPTURE(module);
    CHECK((module == "util" || links.contains("util")));
    CHECK_FALSE(links.contains("cli"));
  }
}

// ARCHITECTURE.md: serve (and api, whose documents it serves) never links run, whose signal
// handlers are process-wide. A module's line in module-deps.txt also names its PRIVATE links, so
// checking every module they reach catches a private link of run further down (sweep once had one).
TEST_CASE("layering: serve and api reach no module that links run") {
  const ModuleDeps deps = read_module_deps(EXPCTL_MODULE_DEPS_FILE);
  for (const std::string top : {"serve", "api"}) {
    REQUIRE(deps.contains(top));
    std::set<std::string> reached = deps.at(top);
    reached.insert(top);
    for (const std::string& module : reached) {
      CAPTURE(top, module);
      REQUIRE(deps.contains(module));
      CHECK_FALSE(deps.at(module).contains("run"));
    }
  }
}

TEST_CASE("layering: the checker reports each include of a module that is not linked, by file and line") {
  expctl::test::TempDir tree;
  tree.write("src/expctl/util/log.hpp", "#pragma once\n");
  tree.write("src/expctl/env/ok.cpp", "#include \"expctl/env/ok.hpp\"\n#include \"expctl/util/log.hpp\"\n");
  tree.write("src/expctl/env/foo.cpp", std::string(11, '\n') + "#include \"expctl/store/store.hpp\"\n");
  tree.write("src/expctl/env/deep/bar.hpp", "// #include \"expctl/store/commented.hpp\"\n  #  include <expctl/cli/cli.hpp>\n");
  tree.write("src/expctl/compare/c.cpp", "#include \"expctl/util/log.hpp\"\n#include \"expctl/store/store.hpp\"\n");
  tree.write("src/expctl/env/notes.md", "#include \"expctl/store/store.hpp\"\n");
  const ModuleDeps deps = parse_module_deps("# comment\nutil:\nenv: util\nstore: util\ncompare: store util\ncli: env\n");
  const Report report = check_tree(tree.path(), deps);
  REQUIRE(report.violations.size() == 2);
  CHECK(report.violations[0] ==
        "src/expctl/env/deep/bar.hpp:2 includes expctl/cli/cli.hpp but expctl_env does not link expctl::cli: link it in "
        "src/expctl/env/CMakeLists.txt if ARCHITECTURE.md's dependency direction allows, or drop the include");
  CHECK_THAT(report.violations[1], Catch::StartsWith("src/expctl/env/foo.cpp:12 includes expctl/store/store.hpp but "
                                                     "expctl_env does not link expctl::store: "));
  CHECK(report.unchecked.empty());
}

TEST_CASE("layering: modules without a target in this build are left unchecked, not failed") {
  expctl::test::TempDir tree;
  tree.write("src/expctl/cli/cmd_run.cpp", "#ifdef WITH_TRAIN\n#include \"expctl/train/trainer.hpp\"\n#endif\n");
  tree.write("src/expctl/train/trainer.hpp", "#include \"expctl/store/store.hpp\"\n");
  const Report report = check_tree(tree.path(), parse_module_deps("util:\nstore: util\ncli: store util\n"));
  CHECK(report.violations.empty());
  CHECK(report.unchecked == std::set<std::string>{"train"});
}

TEST_CASE("layering: include directives are parsed with their module and line") {
  const std::vector<Include> includes =
      expctl_includes("#include <vector>\n#include \"expctl/util/error.hpp\"\n# include <expctl/spec/spec.hpp>\n"
                      "// #include \"expctl/store/store.hpp\"\n#include \"other/expctl/env/x.hpp\"\n");
  REQUIRE(includes.size() == 2);
  CHECK(includes[0].line == 2);
  CHECK(includes[0].module == "util");
  CHECK(includes[0].header == "expctl/util/error.hpp");
  CHECK(includes[1].line == 3);
  CHECK(includes[1].module == "spec");
}

TEST_CASE("layering: a malformed module graph names the line and the fix") {
  CHECK(parse_module_deps("util:\nspec: util\n") == ModuleDeps{{"util", {}}, {"spec", {"util"}}});
  CHECK_THROWS_WITH(parse_module_deps("util:\nspec util\n"),
                    "module-deps.txt:2: expected \"module: dep dep ...\": configure the build again to rewrite it");
}
