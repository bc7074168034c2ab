// `expctl nightly SUITE.yaml`: parses the options, runs the night in-process (nightly/night.hpp:
// plan, rounds, baselines, confirmation, grades), writes the JUnit XML and the Markdown summary and
// prints each entry's grade. How a verdict is reached: docs/nightly.md.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/nightly/night.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"
#ifdef EXPCTL_WITH_TORCH_PROVIDER
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_signals.hpp"
#endif

namespace expctl::cli {
namespace {

using nightly::Grade;
using nightly::NightlyCase;

struct NightlyOptions {
  std::string suite;
  std::string date;  ///< YYYY-MM-DD; default: today (UTC)
  std::string junit;
  std::string summary;
  bool no_run = false;
  bool fail_on_warn = false;
  std::vector<std::string> thresholds;  ///< refused: thresholds live in versioned files
};

void refuse_threshold_flags(const NightlyOptions& options) {
  if (!options.thresholds.empty()) {
    throw util::UsageError(fmt::format(
        "--threshold {}: nightly thresholds live in versioned files only, so a night's verdict can be reproduced "
        "from the repository: put it in the suite entry's `thresholds:` (or `warn:`) or the spec's `regression:` block",
        options.thresholds.front()));
  }
}

nightly::LaunchRun launcher(const GlobalOptions& globals) {
#ifdef EXPCTL_WITH_TORCH_PROVIDER
  // -q or not, a night's runs say only errors and important notes (its grades are the report).
  return nightly::in_process_launcher(store_opener(globals), std::make_shared<TerminalObserver>(true), &process_stop());
#else
  (void)globals;
  return nightly::in_process_launcher(nullptr);
#endif
}

void print_case(const NightlyCase& item) {
  std::cout << util::terminal_safe(
      fmt::format("{}: {}\n", item.spec, item.comparison ? item.grade.line : "skipped: " + item.skipped));
  for (const auto& change : item.changes) {
    std::cout << util::terminal_safe(fmt::format("  changed since the baseline: {}\n", change));
  }
  for (const auto& note : item.grade.notes) {
    std::cout << util::terminal_safe(fmt::format("  note: {}\n", note.text));
  }
}

void print_totals(const std::vector<NightlyCase>& cases, util::ExitCode code) {
  size_t counts[3] = {0, 0, 0};
  size_t skipped = 0;
  for (const auto& item : cases) {
    (item.comparison ? counts[static_cast<int>(item.grade.grade)] : skipped) += 1;
  }
  std::cout << fmt::format("nightly: {} pass, {} warn, {} fail, {} skipped: exit {}\n", counts[0], counts[1], counts[2],
                           skipped, util::to_int(code));
}

void run_nightly(const NightlyOptions& options, GlobalOptions& globals) {
  refuse_threshold_flags(options);
  const compare::Suite suite = compare::load_suite(options.suite);
  nightly::NightRequest request;
  request.date = options.date.empty() ? nightly::today_utc() : options.date;
  request.no_run = options.no_run;
  request.fail_on_warn = options.fail_on_warn;
  request.open_store = [&globals](store::OpenMode mode) { return open_store(globals, mode); };
  request.launch = launcher(globals);
  if (!globals.quiet) {
    request.progress = [](const std::string& line) { std::cerr << "nightly: " << line << '\n'; };
  }
  const nightly::NightResult night = nightly::run_night(suite, request);
  const auto paths = nightly::write_reports(suite.name, night.cases, request.date, options.junit, options.summary);
  globals.result = night.exit_code;
  std::for_each(night.cases.begin(), night.cases.end(), print_case);
  print_totals(night.cases, globals.result);
  std::cout << fmt::format("wrote {} and {}\n", paths.junit, paths.summary);
}

void setup_nightly(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<NightlyOptions>();
  CLI::App* command = app.add_subcommand(
      "nightly",
      "Run a suite (each entry `repeat` times, tagged nightly:<date>), compare each entry with its baseline\n"
      "(an A/B entry's baseline tonight, else the run tagged baseline:<spec name>, else the entry's runs of\n"
      "its last K nights), rerun a suspected timing regression before it fails, grade each entry pass, warn\n"
      "or fail, and write a JUnit XML file and a Markdown summary. Thresholds come from the spec's\n"
      "regression: block and the suite file only (docs/nightly.md).\n"
      "Example: expctl nightly experiments/nightly.yaml --junit results/nightly.xml");
  command->add_option("suite", options->suite, "Suite file (YAML; see docs/nightly.md)")->required();
  command->add_option("--date", options->date, "Night to tag and judge, YYYY-MM-DD (default: today, UTC)");
  command->add_option("--junit", options->junit, "JUnit XML output (default results/nightly-<date>.xml)");
  command->add_option("--summary", options->summary, "Markdown summary output (default results/nightly-<date>.md)");
  command->add_flag("--no-run", options->no_run,
                    "Launch nothing: judge the runs (and reruns) already tagged for the night");
  command->add_flag("--fail-on-warn", options->fail_on_warn, "Exit 3 when an entry is graded warn, instead of 0");
  command->add_option("--threshold", options->thresholds, "Refused: thresholds live in the suite or spec file")
      ->group("")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer() +
                  "nightly: exit 3 when an entry fails (a confirmed timing regression or a correctness\n"
                  "regression); a warn (inconclusive, not confirmed, or between warn and fail thresholds)\n"
                  "exits 0 (3 with --fail-on-warn); 1 when a run failed; 2 when runs are not comparable.\n");
  command->callback([options, globals] { run_nightly(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(nightly, 35, setup_nightly);

}  // namespace expctl::cli
