#include "expctl/cli/support_compare.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/support_store.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/sweep_run/slurm_array.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"

namespace expctl::cli {

compare::CompareOptions make_compare_options(const std::vector<std::string>& ignore,
                                             const std::vector<std::string>& thresholds) {
  compare::CompareOptions options;
  for (const auto& value : ignore) {
    size_t start = 0;
    while (start <= value.size()) {
      const size_t comma = value.find(',', start);
      std::string key = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!key.empty()) {
        options.ignore.push_back(std::move(key));
      }
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  for (const auto& option : thresholds) {
    options.thresholds.push_back(compare::parse_threshold_override(option));
  }
  return options;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    return;
  }
  if (auto written = util::write_file_atomic(path, text); !written) {
    throw util::CompareError(fmt::format("{}: cannot write the report: {}", path, written.error().message),
                             util::ExitCode::run_failed);
  }
}

util::ExitCode outcome_exit_code(compare::Outcome outcome) {
  return static_cast<util::ExitCode>(compare::exit_code(outcome));
}

util::ExitCode outcome_exit_code(compare::Outcome outcome, bool fail_on_inconclusive) {
  return static_cast<util::ExitCode>(compare::exit_code(outcome, fail_on_inconclusive));
}

void add_report_options(CLI::App* command, ReportOptions& options) {
  std::vector<std::string> formats(std::begin(report::k_format_names), std::end(report::k_format_names));
  add_format_option(command, options.format, formats);
  command->add_option("--threshold", options.thresholds, "Override a threshold: NAME=5% | NAME=-0.5pp | NAME=0.002")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("-o,--output", options.output, "Write the report to this file instead of stdout");
  command->add_option("--history", options.history,
                      "Earlier runs per configuration that inform the run-to-run noise (default 20; 0: none)");
  command->add_flag("--fail-on-inconclusive", options.fail_on_inconclusive,
                    "Exit 3 (as for a regression) when a timing metric is inconclusive, instead of 0");
}

util::ExitCode compare_and_report(const GlobalOptions& globals, const std::string& a, const std::string& b,
                                  const ReportOptions& options) {
  // Options first: a bad --threshold is reported before the database is even opened.
  const compare::CompareOptions compare_options = make_compare_options(options.ignore, options.thresholds);
  util::log::debug(util::tune_malloc_for_bulk_reads());
  const auto format = report::parse_format(options.format).value_or(report::Format::text);
  const store::Store db = open_store(globals, store::OpenMode::read_only);
  const compare::Comparison comparison = api::compare_groups(
      db, a, b,
      {.options = compare_options, .history = options.history, .straggler_timeline = format == report::Format::html});
  const bool color = format == report::Format::text && options.output.empty() && use_color(globals);
  write_output(options.output, report::render(comparison, format, {.color = color}));
  return outcome_exit_code(comparison.outcome, options.fail_on_inconclusive);
}

void write_sweep_report(const GlobalOptions& globals, const sweep::Sweep& sweep,
                        const std::vector<std::string>& metrics, const std::string& format, const std::string& output) {
  const sweep_run::StoreLocation where{globals.db_path, globals.local_db, store_is_file(globals), 0};
  auto array = sweep_run::array_points_now(sweep, sweep_run::task_store_dir(sweep, where));
  const auto db = open_store_if_present(globals);
  // A submitted array's tasks write their own stores: before the first merge there may be none.
  EXPCTL_CHECK(db.has_value() || !array.empty(), util::StoreError, "{}; run the sweep first: expctl sweep {}",
               missing_database_hint(globals), sweep.file.string());
  sweep::Report report = sweep::build_report(
      sweep, db ? sweep::completed_runs(sweep, *db) : std::vector<std::vector<store::RunRecord>>(sweep.points.size()),
      metrics);
  report.array = std::move(array);
  write_output(output, sweep::render(report, format));
}

}  // namespace expctl::cli
