// `expctl hash SPEC`: the spec hash, or the canonical bytes it is computed from.

#include <iostream>

#include "expctl/cli/command.hpp"
#include "expctl/spec/spec.hpp"

namespace expctl::cli {

namespace {

struct HashOptions {
  std::string spec;
  std::vector<std::string> overrides;
  bool canonical = false;
  std::string format = "text";
};

void run_hash(const HashOptions& options) {
  // An invalid spec throws util::DiagnosticError: cli::run prints every problem and exits 2.
  const spec::Spec spec = spec::load_spec(options.spec, spec::LoadOptions{options.overrides});
  if (options.format == "json") {
    nlohmann::json document = json_envelope("hash");
    document["file"] = options.spec;
    document["hash"] = spec.hash();
    document["canonical"] = spec.canonical();
    print_json(document);
    return;
  }
  std::cout << (options.canonical ? spec.canonical() : spec.hash()) << '\n';
}

void setup_hash(CLI::App& app, const std::shared_ptr<GlobalOptions>& /*globals*/) {
  auto options = std::make_shared<HashOptions>();
  CLI::App* command = app.add_subcommand(
      "hash",
      "Print the SHA-256 spec hash (64 hex digits) of a valid spec.\n"
      "The hash covers the canonical form: every hashed field with defaults filled in, keys sorted,\n"
      "numbers normalised by type, plus the content of the `env` profile (recipe: docs/spec.md).\n"
      "Example: expctl hash experiments/quickstart.yaml --set seed=1");
  command->add_option("spec", options->spec, "Spec file (YAML)")->required();
  command->add_option("--set", options->overrides, "Override a field: --set key.path=value (repeatable)")
      ->allow_extra_args(false)  // "--set a=1 SPEC": SPEC is positional, not a second override
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_flag("--canonical", options->canonical,
                    "Print the canonical form that is hashed (one line of JSON) instead of the hash");
  add_format_option(command, options->format);
  command->callback([options] { run_hash(*options); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(hash, 11, setup_hash);

}  // namespace expctl::cli
