// `expctl compare A B`: one report (verdict, spec and environment differences, metrics, runs, loss
// curves) and an exit code CI can gate on. Timing metrics are judged per run against the
// run-to-run noise of the sides and of earlier runs of the same spec on the same environment.
#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/report/report.hpp"

namespace expctl::cli {
namespace {

struct CompareCommandOptions {
  std::string a;
  std::string b;
  std::string format = "text";
  std::vector<std::string> ignore;
  std::vector<std::string> thresholds;
  std::string output;
  size_t history = 20;
  bool fail_on_inconclusive = false;
};

void run_compare(const CompareCommandOptions& options, GlobalOptions& globals) {
  // Options first: a bad --threshold is reported before the database is even opened.
  const compare::CompareOptions compare_options = make_compare_options(options.ignore, options.thresholds);
  const store::Store db = open_store(globals, store::OpenMode::read_only);
  const auto a = load_group(db, options.a);
  const auto b = load_group(db, options.b);
  const auto history = load_history(db, a, b, options.history);
  const compare::Comparison comparison = compare::compare_runs(a, b, compare_options, history);
  const auto format = report::parse_format(options.format).value_or(report::Format::text);
  const bool color = format == report::Format::text && options.output.empty() && use_color(globals);
  write_output(options.output, report::render(comparison, format, {.color = color}));
  globals.result = outcome_exit_code(comparison.outcome, options.fail_on_inconclusive);
}

void setup_compare(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<CompareCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Compare run(s) B against baseline run(s) A: verdict, spec and environment differences, every summary\n"
      "metric against its threshold, loss curves. Timing metrics count each run once, against the run-to-run\n"
      "noise of the sides and of earlier runs of the same spec on the same environment (inconclusive when that\n"
      "cannot decide); same spec + environment + strict determinism must reproduce losses bit for bit.\n"
      "Selectors: RUN-ID or prefix, tag:NAME, spec:HASHPREFIX, @latest, @latest~N, a spec file; A1,A2,A3 is a\n"
      "group of repeats. Exit 0 no regression or inconclusive (3 with --fail-on-inconclusive), 3 regression,\n"
      "2 bad selector/input or not comparable.\n"
      "Example: expctl compare tag:baseline:quickstart @latest --threshold samples_per_sec=-3%");
  command->add_option("a", options->a, "Baseline run(s)")->required();
  command->add_option("b", options->b, "Candidate run(s)")->required();
  std::vector<std::string> formats(std::begin(report::k_format_names), std::end(report::k_format_names));
  add_format_option(command, options->format, formats);
  command
      ->add_option("--ignore", options->ignore,
                   "Spec keys (or key prefixes) to leave out of the spec diff, e.g. seed,tags")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--threshold", options->thresholds, "Override a threshold: NAME=5% | NAME=-0.5pp | NAME=0.002")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("-o,--output", options->output, "Write the report to this file instead of stdout");
  command->add_option("--history", options->history,
                      "Earlier runs per configuration that inform the run-to-run noise (default 20; 0: none)");
  command->add_flag("--fail-on-inconclusive", options->fail_on_inconclusive,
                    "Exit 3 (as for a regression) when a timing metric is inconclusive, instead of 0");
  command->footer(exit_codes_footer() +
                  "compare: an inconclusive verdict exits 0, or 3 with --fail-on-inconclusive.\n");
  command->callback([options, globals] { run_compare(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(compare, 32, setup_compare);

}  // namespace expctl::cli
