// README's command table against the binary: every command `expctl --help` lists has a row (a
// new command fails here until the README says what it does). The module and docs lists are
// tested against the build in tests/layering/test_docs.cpp.
#include <fstream>
#include <sstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

using namespace expctl;

namespace {

/// The subcommands of `expctl --help`: the first word of each line indented by two spaces after
/// "Subcommands:", up to the next line that is not indented (the exit codes follow).
std::vector<std::string> help_commands(const std::string& help) {
  std::istringstream in(help);
  std::vector<std::string> commands;
  bool listing = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Subcommands:")) {
      listing = true;
    } else if (listing && !line.starts_with(" ")) {
      break;
    } else if (listing && line.size() > 2 && line[2] != ' ') {
      commands.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return commands;
}

}  // namespace

TEST_CASE("docs: README's command table has a row for every command of expctl --help") {
  const auto help = test::run_expctl({"--help"});
  REQUIRE(help.exit_code == 0);
  const auto commands = help_commands(help.out);
  REQUIRE(commands.size() >= 19);  // the parser still finds them: validate ... sync, in --help's order
  CHECK(commands.front() == "validate");
  CHECK(commands.back() == "sync");
  std::ifstream file(test::source_dir() / "README.md");
  std::stringstream readme;
  readme << file.rdbuf();
  std::string table;  // the rows of the first table: | `expctl ...` | ... |
  std::istringstream in(readme.str());
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| `expctl")) {
      table += line.substr(0, line.find(" | ", 2)) + "\n";
    }
  }
  for (const std::string& command : commands) {
    CAPTURE(command);
    const bool listed = table.find("`expctl " + command + " ") != std::string::npos ||
                        table.find("`expctl " + command + "`") != std::string::npos;
    CHECK(listed);
  }
}
