#include "expctl/sweep_run/validate.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/run/preflight.hpp"
#include "expctl/spec/yaml_tree.hpp"

namespace expctl::sweep_run {

using sweep::Sweep;

namespace {

// What a preflight warns of (a model check that is not sandboxed), as `expctl run` prints it.
void print_warning(const std::string& text) {
  std::cerr << "expctl: " << text << '\n';
}

nlohmann::json errors_json(const std::vector<util::Diagnostic>& diagnostics) {
  nlohmann::json errors = nlohmann::json::array();
  for (const util::Diagnostic& d : diagnostics) {
    errors.push_back({{"file", d.file}, {"line", d.line}, {"column", d.column}, {"message", d.message}});
  }
  return errors;
}

void record_diagnostics(FileCheck& check, const util::DiagnosticError& error) {
  check.errors = error.diagnostics();
  check.report = error.report();
}

// A failure without a position in the file: one error entry naming the file.
void record_failure(FileCheck& check, const util::Failure& error) {
  check.errors = {{check.file, 0, 0, error.what(), ""}};
  check.positioned = false;
  check.report = error.report();
}

// A sweep file: its hash and every point's, or every problem of the file, its base and its points.
FileCheck check_sweep(const std::string& file, const std::vector<std::string>& overrides) {
  FileCheck check{.file = file, .is_sweep = true};
  try {
    if (!overrides.empty()) {
      throw util::DiagnosticError({{file, 0, 0, "--set applies to specs: put the fields under the sweep's set:", ""}});
    }
    check.sweep = sweep::load_sweep(file);
  } catch (const util::DiagnosticError& error) {
    record_diagnostics(check, error);
  } catch (const util::TrainError& error) {
    record_failure(check, error);
  }
  return check;
}

// A problem of an entry's `set:` line is named by the entry that holds it, not as a --set.
util::Diagnostic in_entry(util::Diagnostic diagnostic, const std::string& where) {
  constexpr std::string_view k_set = "--set ";
  if (diagnostic.line == 0 && diagnostic.file.starts_with(k_set)) {
    diagnostic.message = diagnostic.file.substr(k_set.size()) + ": " + diagnostic.message;
    diagnostic.file = where + ".set";
  }
  return diagnostic;
}

// One configuration of a suite entry loaded as the night loads it, and preflighted as a run
// would; its problems are added to `problems`.
std::optional<spec::Spec> load_config(const compare::SuiteConfig& config, const std::string& where,
                                      std::vector<util::Diagnostic>& problems) {
  try {
    spec::Spec spec = spec::load_spec(config.spec, spec::LoadOptions{config.overrides});
    run::preflight_training(spec, print_warning);
    return spec;
  } catch (const util::DiagnosticError& error) {
    for (const util::Diagnostic& diagnostic : error.diagnostics()) {
      problems.push_back(in_entry(diagnostic, where));
    }
  } catch (const util::Failure& error) {
    if (error.exit_code() != util::ExitCode::usage) {
      throw;
    }
    problems.push_back({where, 0, 0, error.what(), ""});
  }
  return std::nullopt;
}

// A nightly suite: its own keys, then every entry's specs with their `set:`, as a night checks
// them before its first run; every entry's problems at once.
FileCheck check_suite(const std::string& file, const std::vector<std::string>& overrides) {
  FileCheck check{.file = file, .is_suite = true};
  try {
    if (!overrides.empty()) {
      throw util::DiagnosticError(
          {{file, 0, 0, "--set applies to specs: put the fields under each suite entry's set:", ""}});
    }
    const compare::Suite suite = compare::load_suite(file);
    SuiteCheck result{suite.name, {}};
    std::vector<util::Diagnostic> problems;
    for (size_t i = 0; i < suite.specs.size(); ++i) {
      const compare::SuiteEntry& entry = suite.specs[i];
      SuiteEntryCheck row{fmt::format("specs[{}]", i), entry.spec.string(), "", std::nullopt};
      const size_t before = problems.size();
      if (const auto spec = load_config({entry.spec, entry.overrides}, entry.where, problems)) {
        row.hash = spec->hash();
        try {
          compare::check_warn_thresholds(entry, spec->values());
        } catch (const util::CompareError& error) {
          problems.push_back({entry.where, 0, 0, error.what(), ""});
        }
      }
      if (entry.baseline) {
        if (const auto spec = load_config(*entry.baseline, entry.where + ".baseline", problems)) {
          row.baseline_hash = spec->hash();
        }
      }
      if (problems.size() == before) {
        result.entries.push_back(std::move(row));
      }
    }
    if (!problems.empty()) {
      throw util::DiagnosticError(std::move(problems));
    }
    check.suite = std::move(result);
  } catch (const util::DiagnosticError& error) {
    record_diagnostics(check, error);
  } catch (const util::CompareError& error) {
    record_failure(check, error);
  }
  return check;
}

}  // namespace

bool is_suite_file(const std::filesystem::path& file) {
  return spec::has_top_level_key(file, {"suite", "specs"});
}

FileCheck check_file(const std::string& file, const std::vector<std::string>& overrides) {
  if (sweep::is_sweep_file(file)) {
    return check_sweep(file, overrides);
  }
  if (is_suite_file(file)) {
    return check_suite(file, overrides);
  }
  FileCheck check{.file = file};
  try {
    spec::Spec spec = spec::load_spec(file, spec::LoadOptions{overrides});
    run::preflight_training(spec, print_warning);  // a model file or arrays: loaded, and one step tried
    check.spec = std::move(spec);
  } catch (const util::DiagnosticError& error) {
    record_diagnostics(check, error);
  } catch (const util::Failure& error) {
    // What the spec asks of this machine (a backend it lacks) or of the user's model and data.
    if (error.exit_code() != util::ExitCode::usage) {
      throw;
    }
    record_failure(check, error);
  }
  return check;
}

nlohmann::json check_json(const FileCheck& check) {
  nlohmann::json entry = {{"file", check.file}};
  if (check.is_sweep) {
    entry["kind"] = "sweep";
  }
  if (check.is_suite) {
    entry["kind"] = "suite";
  }
  if (check.spec) {
    entry.update({{"valid", true},
                  {"hash", check.spec->hash()},
                  {"values", check.spec->values()},
                  {"errors", nlohmann::json::array()}});
  } else if (check.sweep) {
    const nlohmann::json described = to_json(*check.sweep);
    entry.update({{"valid", true},
                  {"hash", check.sweep->hash},
                  {"name", check.sweep->name},
                  {"repeat", check.sweep->repeat},
                  {"axes", described["axes"]},
                  {"points", described["points"]},
                  {"errors", nlohmann::json::array()}});
  } else if (check.suite) {
    nlohmann::json entries = nlohmann::json::array();
    for (const SuiteEntryCheck& row : check.suite->entries) {
      entries.push_back({{"where", row.where},
                         {"spec", row.spec},
                         {"hash", row.hash},
                         {"baseline_hash", row.baseline_hash ? nlohmann::json(*row.baseline_hash) : nullptr}});
    }
    entry.update({{"valid", true},
                  {"hash", nullptr},
                  {"name", check.suite->name},
                  {"entries", std::move(entries)},
                  {"errors", nlohmann::json::array()}});
  } else {
    // An invalid sweep's entry has "points": null, except after a failure without a position,
    // whose entry (as a spec's) has "values": null.
    const char* missing = check.is_suite ? "entries" : check.is_sweep && check.positioned ? "points" : "values";
    entry.update({{"valid", false}, {"hash", nullptr}, {missing, nullptr}, {"errors", errors_json(check.errors)}});
  }
  return entry;
}

}  // namespace expctl::sweep_run
