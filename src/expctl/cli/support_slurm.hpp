#pragma once
/// `expctl sweep FILE --slurm [--wait]`: the points still to run submitted as one Slurm job array,
/// followed with --wait and merged into the store (sweep_run/slurm_array.hpp); and the options of
/// sweep's "Slurm" group, --print-sbatch's included. `expctl run SPEC --slurm` and `expctl resume
/// RUN --slurm`: one run as one job (run/slurm_job.cpp), its options, submission and --wait.

#include <functional>
#include <string>

#include "expctl/cli/command.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/sweep/sbatch.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/sweep_run/execute.hpp"

namespace expctl::cli {

struct SlurmSweepOptions {
  bool print_sbatch = false;
  bool submit = false;  ///< --slurm
  bool wait = false;    ///< --wait
  sweep::SbatchOptions sbatch;
};

void add_slurm_options(CLI::App* command, SlurmSweepOptions& options);

/// Submits the points `execution` plans as one array (nothing when every point is done), prints
/// the job, and with --wait follows it, merges the tasks' stores into the store and sets the exit
/// code: 0 when every task completed, 1 when one did not, 130 when Ctrl-C stopped the following
/// (the array runs on).
void submit_sweep(const sweep::Sweep& sweep, const std::string& file, const sweep_run::Execution& execution,
                  const sweep_run::StoreLocation& where, const SlurmSweepOptions& options, GlobalOptions& globals);

/// `run --slurm` and `resume --slurm`: the "Slurm" group of options.
struct RunSlurmOptions {
  bool submit = false;  ///< --slurm
  bool wait = false;    ///< --wait
  int signal_lead_s = 90;
  run::SlurmSubmit job;
};

void add_run_slurm_options(CLI::App* command, RunSlurmOptions& options);

/// Submits through `submit` (given how the job opens --db), prints the run and its job (text or
/// JSON), and with --wait follows the run until it ends, printing its result as `expctl run` does
/// and leaving with its exit code. With a team server as --db the run is recorded in --local-db
/// (which the job's nodes must share) and shipped; the job ships what it records.
void run_on_slurm(RunSlurmOptions options, GlobalOptions& globals, OutputFormat format,
                  const std::function<run::SlurmSubmission(const run::SlurmSubmit&)>& submit);

/// A run that reads queued or running while the Slurm job holding it has ended: nothing will start
/// it, or record its stop. The store cannot know (the job's expctl never ran, or died); Slurm does.
struct EndedSlurmJob {
  std::string run_id;
  store::RunStatus status = store::RunStatus::queued;
  std::string job;
  std::string job_state;  ///< as Slurm names it ("CANCELLED", "NODE_FAIL"); empty: Slurm no longer knows the job
};

/// Asks scontrol (at most 2 s, once per job, of the first 10 jobs in `runs`' order: `list`'s newest)
/// of the runs among `runs` that have a slurm-job tag and read queued or running; asks nothing when
/// there are none, or when this host has no Slurm configuration ($SLURM_CONF, /etc/slurm/slurm.conf,
/// or a configless node's /run/slurm/conf/slurm.conf). A Slurm that cannot be asked (no
/// scontrol, no slurm.conf, slurmctld down) gives none: `list` and `show` never fail for it.
std::vector<EndedSlurmJob> ended_slurm_jobs(const std::vector<store::RunRecord>& runs);

/// One line: what the run reads, what Slurm says of its job, and the commands that set it right.
std::string ended_slurm_job_text(const EndedSlurmJob& ended);

}  // namespace expctl::cli
