#pragma once
/// Subcommand registry and the options every subcommand shares.
///
/// Each subcommand lives in its own cmd_<name>.cpp, keeps its options in a struct held by a
/// shared_ptr that its callback captures (CLI11's subcom_in_files pattern), and registers itself
/// with EXPCTL_REGISTER_COMMAND. The CLI target is an OBJECT library, so every registration is
/// linked into the binary; `expctl --help` lists commands in registration order.

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "expctl/api/runs.hpp"
#include "expctl/util/exit_code.hpp"

namespace expctl::cli {

/// Options accepted before any subcommand, plus the exit code the subcommand chose.
struct GlobalOptions {
  std::string db_path = "results/expctl.db";  ///< --db, env EXPCTL_DB: a SQLite file or a PostgreSQL URL
  std::string runs_dir{};                     ///< --runs-dir, env EXPCTL_RUNS_DIR; empty: the store's default
  std::string local_db =
      "results/expctl.db";     ///< --local-db, env EXPCTL_LOCAL_DB: what runs write when --db is a server
  int verbosity = 0;           ///< -v count
  bool quiet = false;          ///< -q
  std::string color = "auto";  ///< --color auto|always|never
  util::ExitCode result = util::ExitCode::ok;  ///< set by a subcommand that succeeds with a non-zero code
};

using CommandSetup = void (*)(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals);

struct CommandRegistration {
  const char* name;
  int order;  ///< position in --help (lower first)
  CommandSetup setup;
};

std::vector<CommandRegistration>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(const char* name, int order, CommandSetup setup) {
    command_registry().push_back({name, order, setup});
  }
};

#define EXPCTL_REGISTER_COMMAND(name, order, setup)                \
  static const ::expctl::cli::CommandRegistrar k_register_##name { \
#name, order, setup                                            \
  }

/// Output formats. JSON output is always an object carrying "format_version".
enum class OutputFormat { text, json };

/// Adds `--format` with the given allowed values (default "text") to `command`.
void add_format_option(CLI::App* command, std::string& target, std::vector<std::string> allowed = {"text", "json"});

/// Adds `--sandbox auto|require|off` (docs/models.md#the-sandbox) to `command`: the choice is put
/// in $EXPCTL_SANDBOX, where the run library, its ranks and the model check read it.
void add_sandbox_option(CLI::App* command);

/// Version of every JSON document expctl prints; bump on an incompatible change of any shape.
inline constexpr int k_json_format_version = api::k_json_format_version;

/// {"format_version": 1, "kind": kind}: the start of every JSON document.
nlohmann::json json_envelope(const std::string& kind);
/// The envelope with `body`'s members.
nlohmann::json json_envelope(const std::string& kind, const nlohmann::json& body);

/// Prints `document` to stdout, indented, with a final newline.
void print_json(const nlohmann::json& document);

/// The exit-code table as --help footer text.
std::string exit_codes_footer();

/// True when stdout is a terminal and --color allows colour.
bool use_color(const GlobalOptions& globals);

}  // namespace expctl::cli
