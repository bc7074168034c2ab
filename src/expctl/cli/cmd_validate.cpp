// `expctl validate SPEC...`: checks specs against the field table and prints their hashes.

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/diagnostic.hpp"

namespace expctl::cli {

namespace {

struct ValidateOptions {
  std::vector<std::string> specs;
  std::vector<std::string> overrides;
  std::string format = "text";
  bool print_field_table = false;
};

nlohmann::json errors_json(const util::DiagnosticError& error) {
  nlohmann::json errors = nlohmann::json::array();
  for (const util::Diagnostic& d : error.diagnostics()) {
    errors.push_back({{"file", d.file}, {"line", d.line}, {"column", d.column}, {"message", d.message}});
  }
  return errors;
}

void print_points(const sweep::Sweep& sweep) {
  for (const sweep::Point& point : sweep.points) {
    std::cout << fmt::format("  {:>4}  {}  {}\n", point.index, point.spec.hash(), sweep::point_label(point));
  }
}

// A failure without a position in the file (a model preflight, a backend the machine lacks): one
// error entry naming the file, and its line on stderr in text mode.
void record_failure(nlohmann::json& entry, const std::string& file, const util::Failure& error,
                    const ValidateOptions& options, bool& all_valid) {
  all_valid = false;
  entry.update({{"valid", false},
                {"hash", nullptr},
                {"values", nullptr},
                {"errors", nlohmann::json::array({{{"file", file}, {"line", 0}, {"column", 0}, {"message", error.what()}}})}});
  if (options.format == "text") {
    std::cerr << error.report() << '\n';
  }
}

// A sweep file: its hash and every point's, or every problem of the file, its base and its points.
nlohmann::json validate_sweep(const std::string& file, const ValidateOptions& options, bool& all_valid) {
  nlohmann::json entry = {{"file", file}, {"kind", "sweep"}};
  try {
    if (!options.overrides.empty()) {
      throw util::DiagnosticError({{file, 0, 0, "--set applies to specs: put the fields under the sweep's set:", ""}});
    }
    const sweep::Sweep sweep = sweep::load_sweep(file);
    const nlohmann::json described = sweep::to_json(sweep);
    entry.update({{"valid", true}, {"hash", sweep.hash}, {"name", sweep.name}, {"repeat", sweep.repeat},
                  {"axes", described["axes"]}, {"points", described["points"]}, {"errors", nlohmann::json::array()}});
    if (options.format == "text") {
      std::cout << "ok: " << file << " (sweep " << sweep.hash << ", " << sweep.points.size() << " points)\n";
      print_points(sweep);
    }
  } catch (const util::DiagnosticError& error) {
    all_valid = false;
    entry.update({{"valid", false}, {"hash", nullptr}, {"points", nullptr}, {"errors", errors_json(error)}});
    if (options.format == "text") {
      std::cerr << error.report() << '\n';
    }
  } catch (const util::TrainError& error) {
    record_failure(entry, file, error, options, all_valid);
  }
  return entry;
}

// Validates one spec (or sweep); returns its JSON entry and, in text mode, prints the result.
nlohmann::json validate_one(const std::string& file, const ValidateOptions& options, bool& all_valid) {
  if (sweep::is_sweep_file(file)) {
    return validate_sweep(file, options, all_valid);
  }
  nlohmann::json entry = {{"file", file}};
  try {
    const spec::Spec spec = spec::load_spec(file, spec::LoadOptions{options.overrides});
    run::preflight_training(spec);  // a model file or arrays: loaded, and one step tried
    entry.update(
        {{"valid", true}, {"hash", spec.hash()}, {"values", spec.values()}, {"errors", nlohmann::json::array()}});
    if (options.format == "text") {
      std::cout << "ok: " << file << " (spec " << spec.hash() << ")\n";
    }
  } catch (const util::DiagnosticError& error) {
    all_valid = false;
    entry.update({{"valid", false}, {"hash", nullptr}, {"values", nullptr}, {"errors", errors_json(error)}});
    if (options.format == "text") {
      std::cerr << error.report() << '\n';
    }
  } catch (const util::Failure& error) {
    // What the spec asks of this machine (a backend it lacks) or of the user's model and data.
    if (error.exit_code() != util::ExitCode::usage) {
      throw;
    }
    record_failure(entry, file, error, options, all_valid);
  }
  return entry;
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
    entries.push_back(validate_one(file, options, all_valid));
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
      "hash, axis values; a point's problems point at the axis value that caused them.\n"
      "Example: expctl validate experiments/*.yaml --set optim.lr=0.05");
  command->add_option("spec", options->specs, "Spec files (YAML) to check");
  command
      ->add_option("--set", options->overrides,
                   "Override a field, typed by the field table: --set key.path=value (repeatable, "
                   "applied in order after the file)")
      ->allow_extra_args(false)  // "--set a=1 SPEC": SPEC is positional, not a second override
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_format_option(command, options->format);
  command
      ->add_flag("--print-field-table", options->print_field_table,
                 "Print the Markdown field table of docs/spec.md and exit")
      ->group("");
  command->callback([options, globals] { run_validate(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(validate, 10, setup_validate);

}  // namespace expctl::cli
