// `expctl compare A B`: one report (verdict, spec and environment differences, metrics, runs, loss
// curves) and an exit code CI can gate on. Timing metrics are judged per run against the
// run-to-run noise of the sides and of earlier runs of the same spec on the same environment.
#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {
namespace {

struct CompareCommandOptions {
  std::string a;
  std::string b;
  ReportOptions report;
  std::vector<std::string> metrics;  ///< --metric, for a sweep's report
};

// `compare SWEEP.yaml`: the results across the sweep's points, as `sweep SWEEP.yaml --report`.
util::ExitCode report_sweep(const GlobalOptions& globals, const CompareCommandOptions& options) {
  EXPCTL_CHECK(!options.a.empty() && sweep::is_sweep_file(options.a), util::UsageError,
               "compare needs a baseline A and a candidate B; a single argument must be a sweep file "
               "(expctl compare SWEEP.yaml shows the results across its points)");
  const auto& report = options.report;
  EXPCTL_CHECK(report.thresholds.empty() && report.ignore.empty() && !report.fail_on_inconclusive, util::UsageError,
               "--threshold, --ignore and --fail-on-inconclusive judge an A/B verdict; a sweep's report has none "
               "(compare two of its points: expctl compare tag:sweep-point:I tag:sweep-point:J)");
  write_sweep_report(globals, sweep::load_sweep_file(options.a), options.metrics, report.format, report.output);
  return util::ExitCode::ok;
}

util::ExitCode compare_command(const GlobalOptions& globals, const CompareCommandOptions& options) {
  if (options.b.empty()) {
    return report_sweep(globals, options);
  }
  for (const std::string* side : {&options.a, &options.b}) {
    EXPCTL_CHECK(!sweep::is_sweep_file(*side), util::UsageError,
                 "{} is a sweep file: compare it alone (expctl compare {}) for the results across its points, or "
                 "compare two of its points by tag (tag:sweep-point:I)",
                 *side, *side);
  }
  EXPCTL_CHECK(options.metrics.empty(), util::UsageError,
               "--metric chooses the columns of a sweep's report (expctl compare SWEEP.yaml); an A/B compare "
               "judges every summary metric");
  return compare_and_report(globals, options.a, options.b, options.report);
}

void setup_compare(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<CompareCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Compare run(s) B against baseline run(s) A: verdict, spec and environment differences, every summary\n"
      "metric against its threshold, loss curves. Timing metrics count each run once, against the run-to-run\n"
      "noise of the sides and of earlier runs of the same spec on the same environment (inconclusive when that\n"
      "cannot decide); same spec + environment + strict determinism must reproduce losses bit for bit.\n"
      "Selectors: RUN-ID or prefix, tag:NAME (newest run with the tag), spec:HASHPREFIX, @latest, @latest~N, a\n"
      "spec file; all:tag:NAME / all:spec:HASH is every such run (a group); A1,A2,A3 is a group of repeats.\n"
      "Exit 0 no regression or inconclusive (3 with --fail-on-inconclusive), 3 regression,\n"
      "2 bad selector/input or not comparable.\n"
      "With one argument, a sweep file: the results across its points (as expctl sweep FILE --report).\n"
      "Examples:\n"
      "  expctl compare tag:baseline:quickstart @latest --threshold samples_per_sec=-3%\n"
      "  expctl compare experiments/sweep-quickstart.yaml --format html -o sweep.html");
  command->add_option("a", options->a, "Baseline run(s), or a sweep file")->required();
  command->add_option("b", options->b, "Candidate run(s) (omitted for a sweep file)");
  command->add_option("--metric", options->metrics,
                      "For a sweep file: a summary metric to show (repeatable; default: final_train_loss,\n"
                      "eval_loss, eval_accuracy, samples_per_sec)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_report_options(command, options->report);
  command
      ->add_option("--ignore", options->report.ignore,
                   "Spec keys (or key prefixes) to leave out of the spec diff, e.g. seed,tags")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer() +
                  "compare: an inconclusive verdict exits 0, or 3 with --fail-on-inconclusive.\n");
  command->callback([options, globals] {
    globals->result = compare_command(*globals, *options);
  });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(compare, 32, setup_compare);

}  // namespace expctl::cli
