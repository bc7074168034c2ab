// `expctl validate SPEC...`: checks specs against the field table and prints their hashes.

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/sweep_run/validate.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

namespace {

struct ValidateOptions {
  std::vector<std::string> specs;
  std::vector<std::string> overrides;
  std::string format = "text";
  bool print_field_table = false;
};

void print_points(const sweep::Sweep& sweep) {
  for (const sweep::Point& point : sweep.points) {
    std::cout << fmt::format("  {:>4}  {}  {}\n", point.index, point.spec.hash(), sweep::point_label(point));
  }
}

// The text mode's lines: "ok: ..." on stdout (a sweep's points under it), or the problems on stderr.
void print_check(const sweep_run::FileCheck& check) {
  if (check.spec) {
    std::cout << "ok: " << check.file << " (spec " << check.spec->hash() << ")\n";
  } else if (check.sweep) {
    std::cout << "ok: " << check.file << " (sweep " << check.sweep->hash << ", " << check.sweep->points.size()
              << " points)\n";
    print_points(*check.sweep);
  } else if (check.suite) {
    std::cout << "ok: " << check.file << " (suite " << check.suite->name << ", " << check.suite->entries.size()
              << (check.suite->entries.size() == 1 ? " entry)\n" : " entries)\n");
    for (const sweep_run::SuiteEntryCheck& entry : check.suite->entries) {
      std::cout << fmt::format("  {:<10}  {}  {}{}\n", entry.where, entry.hash, entry.spec,
                               entry.baseline_hash ? " (baseline " + *entry.baseline_hash + ")" : "");
    }
  } else {
    std::cerr << check.report << '\n';
  }
}

void run_validate(const ValidateOptions& options, GlobalOptions& globals) {
  if (options.print_field_table) {
    std::cout << spec::render_field_table_markdown();
    return;
  }
  if (options.specs.empty()) {
    throw util::UsageError("validate needs at least one SPEC file, e.g. expctl validate experiments/quickstart.yaml");
  }
  bool all_valid = true;
  nlohmann::json entries = nlohmann::json::array();
  for (const std::string& file : options.specs) {
    const sweep_run::FileCheck check = sweep_run::check_file(file, options.overrides);
    all_valid = all_valid && check.valid();
    if (options.format == "text") {
      print_check(check);
    }
    entries.push_back(sweep_run::check_json(check));
  }
  if (options.format == "json") {
    nlohmann::json document = json_envelope("validate");
    document["valid"] = all_valid;
    document["specs"] = std::move(entries);
    print_json(document);
  }
  if (!all_valid) {
    globals.result = util::ExitCode::usage;
  }
}

void setup_validate(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* command = app.add_subcommand(
      "validate",
      "Check experiment specs and print their hashes.\n"
      "Every problem in a spec is reported at once as FILE:LINE:COL with the source line; a valid spec\n"
      "prints \"ok: FILE (spec <sha256>)\". Fields and the hash recipe: docs/spec.md. A sweep file (a\n"
      "base spec and axes, docs/sweeps.md) prints its sweep hash and one line per point: index, spec\n"
      "hash, axis values; a point's problems point at the axis value that caused them. A nightly suite\n"
      "(docs/nightly.md) prints one line per entry: its spec hash with the entry's set: applied.\n"
      "Example: expctl validate experiments/*.yaml --set optim.lr=0.05");
  command->add_option("spec", options->specs, "Spec files (YAML) to check");
  command
      ->add_option("--set", options->overrides,
                   "Override a field, typed by the field table: --set key.path=value (repeatable, "
                   "applied in order after the file)")
      ->allow_extra_args(false)  // "--set a=1 SPEC": SPEC is positional, not a second override
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_format_option(command, options->format);
  add_sandbox_option(command);
  command
      ->add_flag("--print-field-table", options->print_field_table,
                 "Print the Markdown field table of docs/spec.md and exit")
      ->group("");
  command->callback([options, globals] { run_validate(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(validate, 10, setup_validate);

}  // namespace expctl::cli
