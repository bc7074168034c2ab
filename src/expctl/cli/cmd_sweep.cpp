// `expctl sweep FILE`: runs the points of a sweep that the store does not hold yet (each as a
// child `expctl run` in a slot of its own), `--report` shows the results across points, and
// `--print-sbatch` writes the Slurm job-array script. The file format and the rules:
// docs/sweeps.md; the sweep itself (plan, pins, slots, runner) is src/expctl/sweep_run/execute.hpp:
// this file parses and prints.

#include <iostream>

#include <unistd.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_slurm.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/sweep_run/execute.hpp"

namespace expctl::cli {
namespace {

struct SweepOptions {
  sweep_run::ExecuteOptions run;
  std::string file;
  bool dry_run = false;
  std::string expect_hash;
  bool report = false;
  std::vector<std::string> metrics;
  std::string output;
  SlurmSweepOptions slurm;  ///< --print-sbatch, --slurm, --wait, --array-limit, --sbatch
  std::string format = "text";
};

void run_points(const sweep::Sweep& sweep, const SweepOptions& options, GlobalOptions& globals,
                const sweep_run::StoreLocation& where) {
  const sweep_run::Execution execution =
      sweep_run::prepare(sweep, options.run, where, [&globals] { return open_store_if_present(globals); });
  if (!globals.quiet) {
    std::cerr << sweep_run::plan_line(sweep, execution);
  }
  if (options.slurm.submit && !options.dry_run) {
    submit_sweep(sweep, options.file, execution, where, options.slurm, globals);
    return;
  }
  const bool json = options.format == "json";
  if (options.dry_run) {
    json ? print_json(json_envelope("sweep-plan", sweep_run::plan_document(sweep, execution)))
         : void(std::cout << sweep_run::dry_run_text(sweep, execution));
    return;
  }
  const auto progress =
      globals.quiet ? sweep_run::ProgressSink() : sweep_run::stream_progress(std::cerr, ::isatty(STDERR_FILENO) == 1);
  const sweep_run::RunnerResult result = sweep_run::execute(sweep, execution, where, progress);
  if (json) {
    print_json(json_envelope("sweep", sweep_run::result_document(sweep, execution, result)));
  } else if (!globals.quiet) {
    std::cerr << sweep_run::result_line(sweep, execution, result, options.file);
  }
  globals.result = sweep_run::exit_code_of(result);
}

void run_sweep(const SweepOptions& options, GlobalOptions& globals) {
  EXPCTL_CHECK(options.report || (options.format != "markdown" && options.format != "html"), util::UsageError,
               "--format {} is for --report: running a sweep prints text or json", options.format);
  EXPCTL_CHECK(!options.slurm.wait || options.slurm.submit, util::UsageError,
               "--wait follows a submitted array: give --slurm too");
  const sweep::Sweep sweep = sweep::load_sweep_file(options.file, options.expect_hash);
  const sweep_run::StoreLocation where{globals.db_path, globals.local_db, store_is_file(globals), globals.verbosity};
  if (options.slurm.print_sbatch) {
    write_output(options.output, sweep_run::sbatch_script(sweep, options.file, where, options.slurm.sbatch));
  } else if (options.report) {
    write_sweep_report(globals, sweep, options.metrics, options.format, options.output);
  } else {
    run_points(sweep, options, globals, where);
  }
}

void add_run_options(CLI::App* command, SweepOptions& options) {
  command
      ->add_option("--parallel", options.run.parallel,
                   "Run N points at once, each in its own slot: the cores this process may use are split\n"
                   "into N disjoint sets (CPU affinity; the ranks' threads follow it), and on a GPU machine\n"
                   "the GPUs too (CUDA_VISIBLE_DEVICES per slot). Default 1")
      ->check(CLI::Range(1, 1024));
  command->add_flag("--force", options.run.force, "Run every point again, whatever the store holds");
  command->add_option("--limit", options.run.limit, "Start at most N runs now; run the sweep again for the rest")
      ->check(CLI::Range(1, 1000000));
  command
      ->add_option("--point", options.run.point,
                   "Run only point I (0-based, as `expctl validate FILE` lists them); default: the\n"
                   "SLURM_ARRAY_TASK_ID of a Slurm array task, else every point")
      ->check(CLI::Range(0, 1000000));
  command->add_flag("--dry-run", options.dry_run, "Print what would run (and what would be resumed), start nothing");
  command->add_option("--expect-hash", options.expect_hash,
                      "Refuse unless the sweep's hash is this one (the --print-sbatch script passes it, so an\n"
                      "edited sweep file cannot shift which point a task runs)");
}

void add_output_options(CLI::App* command, SweepOptions& options) {
  command
      ->add_flag("--report", options.report,
                 "Print the results instead of running: one row per configuration (replicates over seeds\n"
                 "together, median ± run-to-run spread), the axes as columns, the best per metric")
      ->group("Results");
  command
      ->add_option("--metric", options.metrics,
                   "A summary metric for --report (repeatable; default: final_train_loss, eval_loss,\n"
                   "eval_accuracy, samples_per_sec)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Results");
  command->add_option("-o,--output", options.output, "Write the --report or --print-sbatch output to this file")
      ->group("Results");
  add_slurm_options(command, options.slurm);
}

void setup_sweep(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* command = app.add_subcommand(
      "sweep",
      "Run a sweep: every point of FILE (a base spec and axes: grid, zip, seeds, repeat; see\n"
      "docs/sweeps.md) that the store does not hold yet. A point is done when a completed run of its\n"
      "spec hash exists for this machine's environment hash, so a sweep is resumable: after Ctrl-C\n"
      "or a crash, run it again; its interrupted, lost and failed runs are resumed (expctl resume,\n"
      "same run id), the rest start anew. Each point runs as a child `expctl run`, tagged\n"
      "sweep:<name>, sweep-hash:<hash> and sweep-point:<I>; its output goes to a log under\n"
      "<db dir>/sweeps/. One progress line on stderr: runs done/total and an ETA.\n"
      "Examples:\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --parallel 2\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --report --format html -o sweep.html\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --print-sbatch --array-limit 4 > sweep.sbatch\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --slurm --wait --sbatch=--partition=cpu");
  command->add_option("file", options->file, "Sweep file (YAML)")->required();
  add_run_options(command, *options);
  add_output_options(command, *options);
  add_format_option(command, options->format, {"text", "json", "markdown", "html"});
  command->callback([options, globals] { run_sweep(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(sweep, 22, setup_sweep);

}  // namespace expctl::cli
