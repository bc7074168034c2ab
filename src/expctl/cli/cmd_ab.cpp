// `expctl ab A.yaml B.yaml --repeat N`: an A/B experiment on this machine. The two specs run
// interleaved, A B A B ..., so that slow drifts of the machine (temperature, other load) fall on
// both sides alike; every run is recorded under one tag, and the two groups are compared with
// compare's run-level statistics. Ctrl-C keeps the runs that completed.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_signals.hpp"
#include "expctl/nightly/ab.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {
namespace {

struct AbOptions {
  std::string spec_a;
  std::string spec_b;
  int repeat = 3;
  bool vary_seed = false;  ///< repeat i of both sides runs with seed i: a loss question, answered across seeds
  std::vector<std::string> set_both;
  std::vector<std::string> set_a;
  std::vector<std::string> set_b;
  std::vector<std::string> tags;
  ReportOptions report;
};

// What each run reports: errors and important notes only (the lines below say how it went).
run::RunObserver& quiet_observer() {
  static TerminalObserver observer(true);
  return observer;
}

// "expctl ab: run 1/3 of side A (a.yaml)... <id> completed" on stderr; a refusal's tables instead.
nightly::AbRequest ab_request(const AbOptions& options, const GlobalOptions& globals, const std::string& name) {
  nightly::AbRequest request{.spec_a = options.spec_a,
                             .spec_b = options.spec_b,
                             .repeat = options.repeat,
                             .vary_seed = options.vary_seed,
                             .set_both = options.set_both,
                             .set_a = options.set_a,
                             .set_b = options.set_b,
                             .tags = options.tags,
                             .name = name,
                             .open_store = store_opener(globals),
                             .observer = &quiet_observer(),
                             .stop = &process_stop()};
  request.starting = [repeat = options.repeat](char side, int index, const run::RunRequest& run) {
    std::cerr << fmt::format("expctl ab: run {}/{} of side {} ({})...", index, repeat, side, run.spec_file.string())
              << std::flush;
  };
  request.finished = [](char, const run::RunResult& result) {
    if (!result.refusal.empty()) {
      std::cerr << '\n';
      print_run_result(result, OutputFormat::text);
      return;
    }
    std::cerr << fmt::format(" {} {}\n", result.run ? result.run->id : std::string("-"),
                             result.run ? store::to_string(result.run->status) : "not recorded");
  };
  return request;
}

void run_ab(const AbOptions& options, GlobalOptions& globals) {
  (void)make_compare_options({}, options.report.thresholds);  // a bad --threshold is refused before any run
  const std::string name = nightly::ab_experiment_name();
  std::cerr << fmt::format("expctl ab: {} runs a side, interleaved{}; every run is tagged ab:{}\n", options.repeat,
                           options.vary_seed ? "; repeat i of both sides runs with seed i (pairs)" : "", name);
  const nightly::AbRuns runs = nightly::run_ab(ab_request(options, globals, name));
  if (runs.a.empty() || runs.b.empty()) {
    std::cerr << fmt::format("expctl ab: interrupted before each side had a completed run; the runs tagged ab:{} "
                             "are kept\n",
                             name);
    globals.result = util::ExitCode::interrupted;
    return;
  }
  const auto code = compare_and_report(globals, util::join(runs.a, ","), util::join(runs.b, ","), options.report);
  // The groups stay selectable by their tags, without pasting ids (docs/compare.md, Selecting runs).
  std::cerr << fmt::format("expctl ab: compare these groups again with: expctl compare all:tag:ab:{0}:a all:tag:ab:{0}:b\n",
                           name);
  globals.result = runs.interrupted ? util::ExitCode::interrupted : code;
}

void setup_ab(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<AbOptions>();
  CLI::App* command = app.add_subcommand(
      "ab",
      "Run an A/B experiment on this machine: spec A and spec B, --repeat times each, interleaved\n"
      "(A B A B ...), every run recorded and tagged ab:<name> (and ab:<name>:a / ab:<name>:b), then the\n"
      "two groups compared exactly as `expctl compare` compares groups (one value per run against the\n"
      "run-to-run noise). Ctrl-C stops after the current run and keeps what completed (exit 130).\n"
      "Same spec on both sides with --set-b: an A/B of one setting.\n"
      "Speed questions need repeats; loss and accuracy questions need seeds: with one seed every repeat is\n"
      "the same trajectory (copies count once), so add --vary-seed: repeat i of both sides runs with seed i\n"
      "and the verdict uses the per-seed differences (paired t; docs/compare.md).\n"
      "Example: expctl ab experiments/quickstart.yaml experiments/quickstart.yaml --repeat 5 \\\n"
      "           --set-b distributed.grad_compression=fp16");
  command->add_option("a", options->spec_a, "Spec file of side A (the baseline)")->required();
  command->add_option("b", options->spec_b, "Spec file of side B (the candidate)")->required();
  command->add_option("--repeat", options->repeat, "Runs per side (default 3; 5 or more for small effects)")
      ->check(CLI::Range(1, 100));
  command->add_flag("--vary-seed", options->vary_seed,
                    "Run repeat i of both sides with seed i (1..N), so a loss or accuracy change is judged\n"
                    "across seeds on paired differences; without it every repeat uses the spec's seed");
  for (auto [flag, target, help] : {std::tuple{"--set", &options->set_both, "Override a field on both sides"},
                                    std::tuple{"--set-a", &options->set_a, "Override a field on side A only"},
                                    std::tuple{"--set-b", &options->set_b, "Override a field on side B only"}}) {
    command->add_option(flag, *target, std::string(help) + ": key.path=value (repeatable)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  command->add_option("--tag", options->tags, "Tag every run (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_report_options(command, options->report);
  command->footer(exit_codes_footer() +
                  "ab: exit 3 on a regression of B against A; an inconclusive verdict exits 0 (3 with\n"
                  "--fail-on-inconclusive); 1 when a run fails; 130 when interrupted.\n");
  command->callback([options, globals] { run_ab(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(ab, 33, setup_ab);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
