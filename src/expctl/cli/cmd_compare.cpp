// `expctl compare A B`: one report (verdict, spec and environment differences, metrics, runs, loss
// curves) and an exit code CI can gate on. Timing metrics are judged per run against the
// run-to-run noise of the sides and of earlier runs of the same spec on the same environment.
#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"

namespace expctl::cli {
namespace {

struct CompareCommandOptions {
  std::string a;
  std::string b;
  ReportOptions report;
};

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
  add_report_options(command, options->report);
  command
      ->add_option("--ignore", options->report.ignore,
                   "Spec keys (or key prefixes) to leave out of the spec diff, e.g. seed,tags")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer() +
                  "compare: an inconclusive verdict exits 0, or 3 with --fail-on-inconclusive.\n");
  command->callback([options, globals] {
    globals->result = compare_and_report(*globals, options->a, options->b, options->report);
  });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(compare, 32, setup_compare);

}  // namespace expctl::cli
