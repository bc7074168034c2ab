// ARCHITECTURE.md's claims about where something is done, held against the sources. Each test
// names the sentence it checks, which must stand in ARCHITECTURE.md as written (line breaks and
// indentation aside): a claim reworded without its test, or code moved without its claim, fails.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "docs.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

using namespace expctl::test::layering;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Runs of spaces and line breaks as one space: a claim as the Markdown's reader sees it.
std::string flat(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t';
    if (!space) {
      out += c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  return out;
}

void check_claim(std::string_view claim) {
  INFO("ARCHITECTURE.md no longer says, as this test checks: " << claim);
  CHECK_THAT(flat(read_text(expctl::test::source_dir() / "ARCHITECTURE.md")), Catch::Contains(flat(claim)));
}

std::string places(const std::vector<SourceLine>& matches) {
  std::string text;
  for (const SourceLine& match : matches) {
    text += match.file + ":" + std::to_string(match.line) + "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("docs: ARCHITECTURE.md's claim holds: SQLite's and libpq's headers stay in store") {
  check_claim(
      "SQLite's headers (SQLiteCpp, `sqlite3.h`) are included only in `store/`: by its connection wrapper "
      "(`store/connection.*`) and by the files that need SQLite's own API");
  check_claim(
      "libpq's only by `store/pg_connection.*`. No file outside `store/` includes a header that reaches either");
  const auto root = expctl::test::source_dir();
  const auto sqlite = grep_sources(root, R"(#\s*include\s*[<"](SQLiteCpp/|sqlite3\.h))");
  const auto libpq = grep_sources(root, R"(#\s*include\s*[<"](postgresql/)?libpq-fe\.h)");
  REQUIRE(sqlite.size() >= 3);  // the patterns still find them
  REQUIRE_FALSE(libpq.empty());
  for (const SourceLine& match : sqlite) {
    CAPTURE(match.file, match.line);
    CHECK(match.file.starts_with("src/expctl/store/"));
  }
  for (const SourceLine& match : libpq) {
    CAPTURE(match.file, match.line);
    CHECK(match.file.starts_with("src/expctl/store/pg_connection."));
  }
  // Every file that reaches them through our own headers, followed to the end: all in store/.
  for (const auto& direct : {sqlite, libpq}) {
    std::set<std::string> reaching = files_of(direct);
    for (std::set<std::string> next = reaching; !next.empty();) {
      std::set<std::string> found;
      for (const std::string& file : next) {
        if (file.ends_with(".hpp")) {
          const std::string header = file.substr(std::string("src/").size());
          for (const std::string& includer : files_of(grep_sources(root, "#\\s*include\\s*[<\"]" + header + "[>\"]"))) {
            if (reaching.insert(includer).second) {
              found.insert(includer);
            }
          }
        }
      }
      next = found;
    }
    INFO("these files reach SQLite's or libpq's headers:\n" << places(direct));
    for (const std::string& file : reaching) {
      CAPTURE(file);
      CHECK(file.starts_with("src/expctl/store/"));
    }
  }
}

TEST_CASE("docs: ARCHITECTURE.md's claim holds: LibTorch's version macros are read in three named files") {
  check_claim(
      "LibTorch's version macros (`TORCH_VERSION_*`, `USE_C10D_NCCL`) are read there and in two places more: "
      "`train/process_group.cpp` (whether NCCL is compiled in: its header and its backend) and "
      "`train/torchscript_model.cpp` (the version an error message names).");
  const auto readers = grep_sources(expctl::test::source_dir(), R"(TORCH_VERSION_|USE_C10D_NCCL)");
  INFO("LibTorch's version macros are read at:\n"
       << places(readers) << "(decide a version difference in train/compat.hpp, and use what it defines)");
  CHECK(files_of(readers) == std::set<std::string>{"src/expctl/train/compat.hpp", "src/expctl/train/process_group.cpp",
                                                   "src/expctl/train/torchscript_model.cpp"});
}

TEST_CASE("docs: ARCHITECTURE.md's claim holds: only train includes LibTorch") {
  check_claim("so `env` never links torch and the rule \"only train includes torch\" holds");
  const auto torch = grep_sources(expctl::test::source_dir(), R"(#\s*include\s*[<"](torch/|ATen/|c10/|c10d/))");
  REQUIRE_FALSE(torch.empty());
  INFO("LibTorch's headers are included at:\n" << places(torch));
  for (const SourceLine& match : torch) {
    CAPTURE(match.file, match.line);
    CHECK(match.file.starts_with("src/expctl/train/"));
  }
}

TEST_CASE("docs: ARCHITECTURE.md's claim holds: one signal handler, util::InterruptSignals") {
  check_claim(
      "A signal handler is installed only by `util::InterruptSignals` (and put back to the default by the spawner "
      "in a child before it runs its program); `serve`, which has no poll loop to read a pipe in, installs none: it "
      "blocks SIGINT and SIGTERM before its threads start and one thread takes them with `sigwait` "
      "(`cli/cmd_serve.cpp`).");
  const auto handlers = grep_sources(expctl::test::source_dir(),
                                     R"((^|[^\w>.])(sigaction|signal|sigwait|signalfd)\s*\(\s*(SIG|k_|signal\b|&))");
  INFO("signal dispositions are set at:\n" << places(handlers));
  const std::set<std::string> files = files_of(handlers);
  CHECK(files == std::set<std::string>{"src/expctl/cli/cmd_serve.cpp", "src/expctl/util/interrupt_signals.cpp",
                                       "src/expctl/util/spawn.cpp"});
}

TEST_CASE("docs: the source scan finds what it looks for, and only in C++ files") {
  expctl::test::TempDir dir;
  std::filesystem::create_directories(dir / "src/expctl/a");
  std::ofstream(dir / "src/expctl/a/x.cpp") << "int a;\n#include <sqlite3.h>\n";
  std::ofstream(dir / "src/expctl/a/y.hpp") << "// sqlite3.h\n";
  std::ofstream(dir / "src/expctl/a/CMakeLists.txt") << "#include <sqlite3.h>\n";
  const auto matches = grep_sources(dir.path(), R"(#include <sqlite3\.h>)");
  REQUIRE(matches.size() == 1);
  CHECK(matches[0].file == "src/expctl/a/x.cpp");
  CHECK(matches[0].line == 2);
  CHECK(flat("a\n   b  c\n") == "a b c ");
}
