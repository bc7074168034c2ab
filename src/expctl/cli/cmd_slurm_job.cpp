// `expctl slurm_job RUN` (hidden): what the batch script of `expctl run --slurm` runs on each node
// through srun. It starts the queued run, or resumes it when Slurm started the job again, and
// leaves it `queued` when the job is requeued or preempted (run/slurm_job.cpp, docs/slurm.md).

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"

namespace expctl::cli {
namespace {

struct SlurmJobOptions {
  run::SlurmJobRequest request;
  int signal_lead_s = 90;
};

void run_slurm_job(SlurmJobOptions options, GlobalOptions& globals) {
  options.request.open_store = store_opener(globals);
  options.request.signal_lead = std::chrono::seconds(options.signal_lead_s);
  TerminalObserver observer(globals.quiet, OutputFormat::text);  // into the job's output file
  options.request.observer = &observer;
  // With a team server (EXPCTL_DB, from sbatch's environment) the run records into the shared
  // --local-db and ships as `expctl run` does.
  const auto shipper = start_shipper(globals, k_default_ship_wait_s);
  globals.result = run::start_slurm_job(options.request).exit_code;
  finish_shipper(shipper.get(), globals, k_default_ship_wait_s);
}

void setup_slurm_job(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<SlurmJobOptions>();
  CLI::App* command = app.add_subcommand(
      "slurm_job", "Start (or resume) a run that `expctl run --slurm` queued, inside its Slurm job.");
  command->group("");  // hidden: the job script of `expctl run --slurm` runs it
  command->add_option("run", options->request.run_id, "The run's id")->required();
  command->add_flag("--allow-drift", options->request.allow_drift,
                    "Run although the node differs from the pinned stack (recorded as drift)");
  command->add_option("--signal-lead", options->signal_lead_s, "Seconds before the time limit the job's SIGTERM comes")
      ->check(CLI::Range(0, 86400));
  command->callback([options, globals] { run_slurm_job(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(slurm_job, 91, setup_slurm_job);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
