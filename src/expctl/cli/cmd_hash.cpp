// `expctl hash SPEC`: the spec hash, or the canonical bytes it is computed from.

#include <iostream>

#include "expctl/cli/command.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

namespace {

struct HashOptions {
  std::string spec;
  std::vector<std::string> overrides;
  bool canonical = false;
  std::string format = "text";
};

// A sweep: its hash (or canonical form) on the first line, then "<spec hash>  point I: axes".
void hash_sweep(const HashOptions& options) {
  if (!options.overrides.empty()) {
    throw util::UsageError("--set applies to specs: put the fields under the sweep's set:");
  }
  const sweep::Sweep sweep = sweep::load_sweep(options.spec);
  if (options.format == "json") {
    nlohmann::json document = json_envelope("hash");
    document["file"] = options.spec;
    document["hash"] = sweep.hash;
    document["canonical"] = sweep.canonical;
    document["sweep"] = sweep::to_json(sweep);
    print_json(document);
    return;
  }
  if (options.canonical) {
    std::cout << sweep.canonical << '\n';  // only the hashed bytes: `| sha256sum` gives the hash
    return;
  }
  std::cout << sweep.hash << '\n';
  for (const sweep::Point& point : sweep.points) {
    std::cout << point.spec.hash() << "  point " << point.index << ": " << sweep::point_label(point) << '\n';
  }
}

void run_hash(const HashOptions& options) {
  if (sweep::is_sweep_file(options.spec)) {
    hash_sweep(options);
    return;
  }
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
      "A sweep file (docs/sweeps.md) prints the sweep hash (over its points' hashes, in order, and\n"
      "its repeat count), then one line per point: its spec hash, index and axis values\n"
      "(--canonical: only the sweep's canonical form).\n"
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
