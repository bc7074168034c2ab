#pragma once
/// Helpers shared by `expctl compare` and `expctl nightly`: turning command-line options into
/// compare options, resolving both sides, and writing a rendered report.

#include <string>
#include <vector>

#include "expctl/api/compare.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/compare/comparison.hpp"
#include "expctl/report/report.hpp"
#include "expctl/store/store.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::cli {

/// --ignore (each value may hold a comma-separated list) and --threshold NAME=VALUE options.
/// Throws util::CompareError (exit 2) for a bad threshold.
compare::CompareOptions make_compare_options(const std::vector<std::string>& ignore,
                                             const std::vector<std::string>& thresholds);

/// Loading both sides: the one implementation the server shares (api/compare.hpp).
using api::load_group;
using api::load_history;

/// Writes `text` to `path` atomically, or to stdout when `path` is empty or "-".
void write_output(const std::string& path, const std::string& text);

/// The exit code of a comparison's outcome (0, 3 or 2; inconclusive 0).
util::ExitCode outcome_exit_code(compare::Outcome outcome);

/// As outcome_exit_code, with inconclusive exiting 3 when `fail_on_inconclusive`.
util::ExitCode outcome_exit_code(compare::Outcome outcome, bool fail_on_inconclusive);

/// The report options `compare` and `ab` share: --format, --threshold, -o, --history,
/// --fail-on-inconclusive.
struct ReportOptions {
  std::string format = "text";
  std::vector<std::string> ignore;  ///< --ignore (compare only)
  std::vector<std::string> thresholds;
  std::string output;
  size_t history = 20;
  bool fail_on_inconclusive = false;
};

/// Declares ReportOptions' flags (all but --ignore) on `command`.
void add_report_options(CLI::App* command, ReportOptions& options);

/// Compares group `a` against group `b` (selectors) with history, writes the report and returns
/// the exit code. Options are checked before the database is opened.
util::ExitCode compare_and_report(const GlobalOptions& globals, const std::string& a, const std::string& b,
                                  const ReportOptions& options);

/// Writes the report across a sweep's points (sweep::report_of) in `format` to `output` (stdout
/// when empty or "-"), for `sweep FILE --report` and `compare SWEEP`. A missing store is a
/// StoreError naming the sweep to run.
void write_sweep_report(const GlobalOptions& globals, const sweep::Sweep& sweep,
                        const std::vector<std::string>& metrics, const std::string& format, const std::string& output);

}  // namespace expctl::cli
