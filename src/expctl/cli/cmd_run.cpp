// `expctl run SPEC`: validate, hold the machine against the pinned stack, record the run, launch
// and supervise this node's ranks, stream their metrics into the store, print the summary.
// The runner's contract (records, summary fields, multi-node, external launchers) is docs/run.md.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_signals.hpp"
#include "expctl/cli/support_slurm.hpp"

namespace expctl::cli {
namespace {

struct RunOptions {
  run::RunRequest request;
  std::string format = "text";
  double ship_wait_s = k_default_ship_wait_s;
  RunSlurmOptions slurm;
};

void run_run(RunOptions options, GlobalOptions& globals) {
  options.request.open_store = store_opener(globals);
  const OutputFormat format = options.format == "json" ? OutputFormat::json : OutputFormat::text;
  if (options.slurm.submit) {
    TerminalObserver notes(globals.quiet);
    options.request.observer = &notes;  // validation's warnings
    run_on_slurm(options.slurm, globals, format,
                 [&options](const run::SlurmSubmit& job) { return run::submit_run_to_slurm(options.request, job); });
    return;
  }
  if (options.slurm.wait) {
    throw util::UsageError("--wait follows a Slurm job: give --slurm too");
  }
  TerminalObserver observer(globals.quiet, format);
  options.request.observer = &observer;  // prints the result at the end
  options.request.stop = &process_stop();
  const auto shipper = start_shipper(globals, options.ship_wait_s);  // with a server as --db
  globals.result = run::run_spec(options.request).exit_code;
  finish_shipper(shipper.get(), globals, options.ship_wait_s);  // the last pass, and what it left
}

void setup_run(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run an experiment: validate the spec, check the pinned stack, record the run, train on\n"
      "distributed.nproc_per_node local ranks (fail-fast supervision, per-rank logs in the run\n"
      "folder), store every step's metrics and print the summary. Ctrl-C checkpoints and stops\n"
      "(exit 130; continue with `expctl resume RUN`). Several hosts: run it on each with\n"
      "--nnodes/--node-rank/--master-addr/--master-port. Under torchrun/mpirun/srun it acts as\n"
      "one rank (global rank 0 records). Decoded datasets are cached in $EXPCTL_CACHE_DIR, else\n"
      "~/.cache/expctl (EXPCTL_CACHE_DIR=none turns that off); ranks load LibTorch without the\n"
      "libraries it never uses (EXPCTL_TORCH_TRIM=off loads it whole). A NaN/Inf loss ends the run\n"
      "`diverged` (train.nonfinite=skip skips such steps instead); if expctl run itself dies, the run\n"
      "shows as `lost` and `expctl resume` continues it. Faults and their messages: docs/run.md.\n"
      "A spec with program.command runs your own training program (a PyTorch DDP script, any\n"
      "executable) on the ranks instead, under torchrun's environment; it reports metrics with\n"
      "`import expctl; expctl.log(step, loss=..., samples=...)` or JSON lines on $EXPCTL_METRICS_FD\n"
      "(docs/program.md).\n"
      "On Slurm, --slurm submits the run as a batch job (queued, then running; a requeue or\n"
      "preemption resumes it under the same id; docs/slurm.md).\n"
      "Examples: expctl run experiments/quickstart.yaml --set train.max_steps=50\n"
      "          expctl run experiments/quickstart.yaml --slurm --time 1:00:00 --wait\n"
      "          expctl run experiments/python-ddp/ddp.yaml --set program.params.lr=0.1");
  command->add_option("spec", options->request.spec_file, "Spec file (YAML)")->required();
  command->add_option("--set", options->request.overrides, "Override a field: --set key.path=value (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_sandbox_option(command);
  command->add_flag("--allow-drift", options->request.allow_drift,
                    "Run although the machine differs from the pinned stack; each drifted pin is recorded\n"
                    "as a tag drift:<field> and under summary.drift");
  command->add_flag("--strict-inputs", options->request.strict_inputs,
                    "A program run whose program imported a local module that no program.files pattern\n"
                    "covers (its content is not in the spec hash) fails with exit 2 instead of a warning");
  command->add_option("--nnodes", options->request.nnodes, "Number of hosts (default: the spec's distributed.nnodes)")
      ->check(CLI::Range(1, 1024));
  command->add_option("--node-rank", options->request.node_rank, "This host's index, 0..nnodes-1 (default 0)")
      ->check(CLI::Range(0, 1023));
  command->add_option("--master-addr", options->request.master_addr,
                      "Host of node 0, whose expctl run hosts the rendezvous store (needed with --nnodes > 1)");
  command->add_option("--master-port", options->request.master_port,
                      "Port of node 0's rendezvous store (default: the spec's distributed.master_port). A single\n"
                      "node needs none: its ranks meet in a private file store and nothing listens")
      ->check(CLI::Range(0, 65535));
  command
      ->add_option("--tensorboard", options->request.tensorboard,
                   "Write TensorBoard event files live under DIR: DIR/<run id>/rank<R>/ per rank and\n"
                   "DIR/<run id>/job/ for the job-wide series (`tensorboard --logdir DIR` shows them while\n"
                   "the run goes on; the spec's metrics.tensorboard does the same; not hashed)")
      ->type_name("DIR");
  command->add_option("--tag", options->request.tags, "Tag the run (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_format_option(command, options->format);
  add_ship_wait_option(command, options->ship_wait_s);
  add_run_slurm_options(command, options->slurm);
  command->callback([options, globals] { run_run(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(run, 20, setup_run);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
