// ARCHITECTURE.md's size and terminal rules, held against the tree: a file under run/ stays one
// lifecycle's room (at most 500 lines; a new lifecycle is a new file), a `cli/cmd_*.cpp` stays a
// thin front end (at most 150 lines; what grows goes into api/ or a support_*.cpp), and the run
// library writes nothing to the terminal itself: what a run says goes to the observer in its
// request (run/observer.hpp), and the CLI's printer writes it.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  REQUIRE(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

std::string joined(const std::vector<std::string>& items) {
  return std::accumulate(items.begin(), items.end(), std::string(),
                         [](std::string all, const std::string& item) { return all + item + "\n"; });
}

// The files of `folder` under `root` whose name starts with `prefix` and ends with one of
// `extensions`, as paths relative to `root`, sorted.
std::vector<fs::path> files_of(const fs::path& root, const fs::path& folder, const std::string& prefix,
                               const std::vector<std::string>& extensions) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(root / folder)) {
    const std::string name = entry.path().filename().string();
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() && name.starts_with(prefix) &&
        std::find(extensions.begin(), extensions.end(), extension) != extensions.end()) {
      files.push_back(folder / name);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// "src/expctl/run/engine.cpp has 1131 lines, more than 500: ..." for each file over `limit`.
std::vector<std::string> over_limit(const fs::path& root, const std::vector<fs::path>& files, std::size_t limit,
                                    const std::string& fix) {
  std::vector<std::string> problems;
  for (const auto& file : files) {
    const std::size_t count = read_lines(root / file).size();
    if (count > limit) {
      problems.push_back(file.string() + " has " + std::to_string(count) + " lines, more than " +
                         std::to_string(limit) + ": " + fix);
    }
  }
  return problems;
}

// What writes to the terminal in C++ source: each is reported with its file and line, outside
// `//` comments.
const std::vector<std::string> k_terminal_writes = {"std::cerr", "std::cout", "std::clog",     "stderr",       "stdout",
                                                    "printf(",   "puts(",     "STDERR_FILENO", "STDOUT_FILENO"};

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// `word` in `code` as a name of its own (check_resumed_inputs( holds no puts(, stdout_lines no
// stdout).
bool names(const std::string& code, const std::string& word) {
  for (auto at = code.find(word); at != std::string::npos; at = code.find(word, at + 1)) {
    const bool starts = at == 0 || !identifier_char(code[at - 1]);
    const auto end = at + word.size();
    const bool ends = !identifier_char(word.back()) || end == code.size() || !identifier_char(code[end]);
    if (starts && ends) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> terminal_writes(const fs::path& root, const std::vector<fs::path>& files) {
  std::vector<std::string> problems;
  for (const auto& file : files) {
    const auto lines = read_lines(root / file);
    for (std::size_t index = 0; index < lines.size(); ++index) {
      const std::string code = lines[index].substr(0, lines[index].find("//"));
      for (const auto& word : k_terminal_writes) {
        if (names(code, word)) {
          problems.push_back(file.string() + ":" + std::to_string(index + 1) + " writes to the terminal (" + word +
                             "): report it to the request's observer (run/observer.hpp) instead");
        }
      }
    }
  }
  return problems;
}

const fs::path k_run = fs::path("src") / "expctl" / "run";
const fs::path k_cli = fs::path("src") / "expctl" / "cli";

}  // namespace

TEST_CASE("layering: every run/ source file has at most 500 lines and every cli/cmd_*.cpp at most 150") {
  const fs::path root = expctl::test::source_dir();
  const auto run_files = files_of(root, k_run, "", {".cpp"});
  const auto commands = files_of(root, k_cli, "cmd_", {".cpp"});
  REQUIRE(run_files.size() > 5);
  REQUIRE(commands.size() > 10);
  auto problems = over_limit(root, run_files, 500,
                             "one file per lifecycle (run/lifecycle.hpp): split it, a new lifecycle is a new file");
  const auto long_commands = over_limit(
      root, commands, 150, "a command parses options and prints: move the work into api/ or a cli/support_*.cpp");
  problems.insert(problems.end(), long_commands.begin(), long_commands.end());
  INFO(joined(problems));
  CHECK(problems.empty());
}

TEST_CASE("layering: the run library writes nothing to the terminal, its observer does") {
  const fs::path root = expctl::test::source_dir();
  const auto files = files_of(root, k_run, "", {".cpp", ".hpp", ".h"});
  REQUIRE(files.size() > 5);
  const auto problems = terminal_writes(root, files);
  INFO(joined(problems));
  CHECK(problems.empty());
}

TEST_CASE("layering: the size and terminal rules name each file, its line count and each write's line") {
  expctl::test::TempDir tree;
  tree.write("src/expctl/run/long.cpp", std::string(501, '\n'));
  tree.write("src/expctl/run/fits.cpp", std::string(500, '\n'));
  tree.write("src/expctl/run/loud.cpp",
             "// std::cerr in a comment is fine\nint x;\n  std::cerr << \"hi\";  // not fine\n"
             "std::printf(\"x\"); int stdout_lines = 0; check_puts(stdout_lines);\n");
  const auto files = files_of(tree.path(), k_run, "", {".cpp"});
  REQUIRE(files.size() == 3);
  const auto long_files = over_limit(tree.path(), files, 500, "split it");
  REQUIRE(long_files.size() == 1);
  CHECK(long_files[0] == "src/expctl/run/long.cpp has 501 lines, more than 500: split it");
  const auto writes = terminal_writes(tree.path(), files);
  REQUIRE(writes.size() == 2);
  CHECK_THAT(writes[0], Catch::StartsWith("src/expctl/run/loud.cpp:3 writes to the terminal (std::cerr)"));
  CHECK_THAT(writes[1], Catch::StartsWith("src/expctl/run/loud.cpp:4 writes to the terminal (printf()"));
}
