#include "expctl/cli/cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/build_info.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {

namespace {

// A Hydra-style positional override (`expctl run spec.yaml optim.lr=0.1`) is refused by CLI11 as
// an unexpected argument: say what was meant.
std::string override_hint(std::string_view message) {
  constexpr std::string_view k_unexpected = "not expected: ";
  const size_t at = message.find(k_unexpected);
  if (at == std::string_view::npos) {
    return "";
  }
  const std::string_view argument = message.substr(at + k_unexpected.size());
  const size_t equals = argument.find('=');
  if (equals == std::string_view::npos || equals == 0 || argument.starts_with("-") ||
      argument.find('/') != std::string_view::npos) {
    return "";
  }
  return fmt::format(" (did you mean `--set {}`?)", argument.substr(0, argument.find_first_of(" \n")));
}

constexpr const char* k_description =
    "expctl: reproducible distributed deep-learning experiments.\n"
    "An experiment is a YAML spec, validated and SHA-256 hashed; each run is recorded in a\n"
    "SQLite store with its environment fingerprint, metrics and artifacts.";

std::string version_text() {
  const auto& info = util::build_info();
  return fmt::format("expctl {} (commit {}, LibTorch {}, {} {})", info.version, info.git_commit, info.torch_version,
                     info.compiler, info.build_type);
}

void add_global_options(CLI::App& app, GlobalOptions& globals) {
  if (const char* env_db = std::getenv("EXPCTL_DB"); env_db != nullptr && *env_db != '\0') {
    globals.db_path = env_db;
  }
  app.add_option("--db", globals.db_path,
                 "Results store (env EXPCTL_DB): a SQLite file, or a team's PostgreSQL server as "
                 "postgresql://USER@HOST/DB or service=NAME (passwords in ~/.pgpass, see docs/store.md)")
      ->default_str(globals.db_path)
      ->envname("EXPCTL_DB");
  app.add_option("--runs-dir", globals.runs_dir,
                 "Folder of run folders (env EXPCTL_RUNS_DIR; default: runs/ beside a SQLite file, "
                 "results/runs with a server)")
      ->envname("EXPCTL_RUNS_DIR");
  app.add_option("--local-db", globals.local_db,
                 "With a server as --db: the node-local SQLite store that run and resume write and the\n"
                 "shipper sends to the server (env EXPCTL_LOCAL_DB)")
      ->default_str(globals.local_db)
      ->envname("EXPCTL_LOCAL_DB");
  app.add_flag("-v,--verbose", globals.verbosity, "More log output on stderr (-vv for debug)");
  app.add_flag("-q,--quiet", globals.quiet, "Only errors on stderr");
  app.add_option("--color", globals.color, "Colour: auto|always|never (NO_COLOR is honoured)")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
  app.set_version_flag("--version", version_text, "Print expctl's version, git commit and LibTorch version");
}

void apply_log_level(const GlobalOptions& globals) {
  using util::log::Level;
  if (globals.quiet) {
    util::log::set_level(Level::error);
  } else if (globals.verbosity >= 2) {
    util::log::set_level(Level::debug);
  } else if (globals.verbosity == 1) {
    util::log::set_level(Level::info);
  }
}

// CLI11 reports a mistyped command as "A subcommand is required", which hides the typo. Find
// the first word that is neither an option nor a global option's value, and name it. Whether an
// option takes a value is asked of CLI11, so a new global option needs no change here.
void check_command_word(const CLI::App& app, int argc, char** argv, const std::vector<CommandRegistration>& commands) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") {
      return;
    }
    if (!word.empty() && word[0] == '-') {
      const CLI::Option* option = word.find('=') == std::string::npos ? app.get_option_no_throw(word) : nullptr;
      i += (option != nullptr && option->get_items_expected_min() > 0) ? 1 : 0;
      continue;
    }
    std::vector<std::string> names;
    for (const CommandRegistration& command : commands) {
      if (word == command.name) {
        return;
      }
      names.emplace_back(command.name);
    }
    const auto suggestion = util::closest_match(word, names);
    throw util::UsageError(fmt::format("unknown command \"{}\"{}; run 'expctl --help' for the list of commands", word,
                                       suggestion ? fmt::format(" (did you mean \"{}\"?)", *suggestion) : ""));
  }
}

}  // namespace

int run(int argc, char** argv) {
  // On every way out, a LibTorch load that a command started (run, resume, validate) has ended
  // before the process exits: see train::plugin::settle.
  struct SettleTraining {
    ~SettleTraining() { train::plugin::settle(); }
  } settle_training;
  CLI::App app{k_description, "expctl"};
  app.footer(exit_codes_footer() + "\nRun 'expctl <command> --help' for a command's options.");
  app.require_subcommand(1);
  app.fallthrough();
  auto globals = std::make_shared<GlobalOptions>();
  add_global_options(app, *globals);

  std::vector<CommandRegistration> commands = command_registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const CommandRegistration& a, const CommandRegistration& b) { return a.order < b.order; });
  for (const CommandRegistration& command : commands) {
    command.setup(app, globals);
  }
  for (CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_footer().empty()) {
      sub->footer(exit_codes_footer());
    }
  }
  app.parse_complete_callback([&globals] { apply_log_level(*globals); });

  try {
    check_command_word(app, argc, argv, commands);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "expctl: error: " << e.what() << override_hint(e.what()) << "\n"
              << "Run 'expctl --help' (or 'expctl <command> --help') for usage.\n";
    return util::to_int(util::ExitCode::usage);
  } catch (const util::Failure& e) {
    std::cerr << e.report() << '\n';
    return util::to_int(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "expctl: error: internal error, please report: " << e.what() << '\n';
    return util::to_int(util::ExitCode::run_failed);
  }
  return util::to_int(globals->result);
}

}  // namespace expctl::cli
