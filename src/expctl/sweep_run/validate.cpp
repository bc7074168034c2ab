#include "expctl/sweep_run/validate.hpp"

#include "expctl/run/preflight.hpp"

namespace expctl::sweep_run {

using sweep::Sweep;

namespace {

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

}  // namespace

FileCheck check_file(const std::string& file, const std::vector<std::string>& overrides) {
  if (sweep::is_sweep_file(file)) {
    return check_sweep(file, overrides);
  }
  FileCheck check{.file = file};
  try {
    spec::Spec spec = spec::load_spec(file, spec::LoadOptions{overrides});
    run::preflight_training(spec);  // a model file or arrays: loaded, and one step tried
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
  } else {
    // An invalid sweep's entry has "points": null, except after a failure without a position,
    // whose entry (as a spec's) has "values": null.
    const char* missing = check.is_sweep && check.positioned ? "points" : "values";
    entry.update({{"valid", false}, {"hash", nullptr}, {missing, nullptr}, {"errors", errors_json(check.errors)}});
  }
  return entry;
}

}  // namespace expctl::sweep_run
