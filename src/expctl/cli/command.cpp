#include "expctl/cli/command.hpp"

#include <iostream>

#include <unistd.h>

#include <fmt/format.h>
#include <stdlib.h>

#include "expctl/util/sandbox.hpp"

namespace expctl::cli {

std::vector<CommandRegistration>& command_registry() {
  static std::vector<CommandRegistration> registry;
  return registry;
}

void add_sandbox_option(CLI::App* command) {
  command
      ->add_option_function<std::string>(
          "--sandbox", [](const std::string& mode) { ::setenv(util::sandbox::k_mode_variable, mode.c_str(), 1); },
          "Where the model (or a program with program.sandbox) may write: auto (only its run folder\n"
          "where the kernel has Landlock; a line says when it has not), require (refuse to run\n"
          "without Landlock, exit 2), off. Default: $EXPCTL_SANDBOX, else auto (docs/models.md)")
      ->check(CLI::IsMember({"auto", "require", "off"}))
      ->option_text("MODE");
}

void add_format_option(CLI::App* command, std::string& target, std::vector<std::string> allowed) {
  std::string description = "Output format: ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    description += (i > 0 ? "|" : "") + allowed[i];
  }
  description += " (json output is stable and versioned by \"format_version\")";
  command->add_option("--format", target, description)->check(CLI::IsMember(allowed))->default_val(allowed.front());
}

nlohmann::json json_envelope(const std::string& kind) {
  return api::json_envelope(kind);
}

nlohmann::json json_envelope(const std::string& kind, const nlohmann::json& body) {
  nlohmann::json document = api::json_envelope(kind);
  document.update(body);
  return document;
}

void print_json(const nlohmann::json& document) {
  std::cout << document.dump(2) << '\n';
}

std::string exit_codes_footer() {
  std::string text = "Exit codes:\n";
  for (const auto& entry : util::k_exit_codes) {
    text += fmt::format("  {:<4} {}\n", util::to_int(entry.code), entry.meaning);
  }
  return text;
}

bool use_color(const GlobalOptions& globals) {
  if (globals.color == "always") {
    return true;
  }
  if (globals.color == "never" || std::getenv("NO_COLOR") != nullptr) {
    return false;
  }
  return ::isatty(STDOUT_FILENO) == 1;
}

}  // namespace expctl::cli
