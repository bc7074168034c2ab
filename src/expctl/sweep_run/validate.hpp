#pragma once
/// `expctl validate FILE`: one spec, sweep or nightly suite file checked as a run would check it,
/// every problem at once. A spec is loaded with its overrides and preflighted (run/preflight.hpp: a
/// model file or arrays loaded, one step tried); a sweep is loaded with every point (sweep.hpp); a
/// suite (compare/suite.hpp) with every entry's specs and their `set:`. The CLI prints the result;
/// `check_json` is its entry in `validate --format json`.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/suite.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/diagnostic.hpp"

namespace expctl::sweep_run {

/// One entry of a valid suite: where it is and the hashes of the specs it runs.
struct SuiteEntryCheck {
  std::string where;                         ///< "specs[0]"
  std::string spec;                          ///< the spec file, as the suite names it resolved
  std::string hash;                          ///< the entry's spec with its `set:`
  std::optional<std::string> baseline_hash;  ///< an A/B entry's baseline configuration's
};

/// A valid suite.
struct SuiteCheck {
  std::string name;
  std::vector<SuiteEntryCheck> entries;
};

/// What checking one file found.
struct FileCheck {
  std::string file{};  ///< as given
  bool is_sweep = false;
  bool is_suite = false;
  std::optional<spec::Spec> spec{};     ///< the valid spec
  std::optional<sweep::Sweep> sweep{};  ///< the valid sweep
  std::optional<SuiteCheck> suite{};    ///< the valid suite
  /// Every problem of an invalid file. A failure without a position in the file (a model
  /// preflight, a backend the machine lacks) is one entry at line 0, with `positioned` false.
  std::vector<util::Diagnostic> errors{};
  bool positioned = true;
  std::string report{};  ///< the failure as `expctl: error: ...` prints it (util::Failure::report)

  bool valid() const { return spec.has_value() || sweep.has_value() || suite.has_value(); }
};

/// True when `file` is a YAML mapping with a top-level `suite` or `specs` key: a nightly suite.
bool is_suite_file(const std::filesystem::path& file);

/// Checks `file`: a sweep when sweep::is_sweep_file says so, a suite when is_suite_file does
/// (overrides are refused for both: they belong under the file's `set:`), else a spec with
/// `overrides` applied in order. A spec's failure that is not an input error (exit code other than
/// 2) is thrown, not reported.
FileCheck check_file(const std::string& file, const std::vector<std::string>& overrides);

/// The file's entry of `validate --format json`: {"file", "valid", "hash", "errors": [{"file",
/// "line", "column", "message"}], a spec's "values", a sweep's "kind": "sweep", "name", "repeat",
/// "axes" and "points", a suite's "kind": "suite", "name" and "entries": [{"where", "spec", "hash",
/// "baseline_hash"}]}.
nlohmann::json check_json(const FileCheck& check);

}  // namespace expctl::sweep_run
