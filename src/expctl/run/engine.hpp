#pragma once
/// The run lifecycle's entry points. `expctl run`, `resume` and `worker`, ranks under an external
/// launcher (torchrun, mpirun, srun) and `expctl nightly` all call these in-process; the CLI only
/// parses options and hands in its observer (what the run reports, run/observer.hpp) and the
/// process's stop signals (run/stop.hpp). The library writes nothing to the terminal itself.
/// Each lifecycle has its file (lifecycle.hpp lists them).

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/env/diff.hpp"
#include "expctl/env/verify.hpp"
#include "expctl/run/observer.hpp"
#include "expctl/run/stop.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/exit_code.hpp"

namespace expctl::run {

/// Opens the results store the run is recorded in (the CLI's --db / EXPCTL_DB).
using OpenStore = std::function<store::Store()>;

/// What `expctl run SPEC` asks for.
struct RunRequest {
  std::filesystem::path spec_file;
  std::vector<std::string> overrides;  ///< --set key=value
  std::vector<std::string> tags;       ///< --tag, on top of the spec's tags
  bool allow_drift = false;
  /// --strict-inputs: a program run whose program imported a local module that no program.files
  /// pattern covers fails (exit 2) instead of naming it in a warning (docs/program.md).
  bool strict_inputs = false;
  int nnodes = 0;  ///< 0: the spec's distributed.nnodes
  int node_rank = 0;
  std::string master_addr;
  int master_port = -1;  ///< -1: the spec's distributed.master_port
  /// --tensorboard DIR: the run's metrics.tensorboard in place of the spec's (a location, not
  /// hashed); empty: the spec's.
  std::filesystem::path tensorboard;
  OpenStore open_store;
  /// Hears what the run reports (null: nobody, SilentObserver); it outlives the call.
  RunObserver* observer = nullptr;
  /// The process's stop signals, armed when this process trains as a rank under an external
  /// launcher (null: none, nothing stops such a rank but its launcher's kill).
  RankStop* stop = nullptr;
};

/// What `expctl resume RUN` asks for.
struct ResumeRequest {
  std::string selector;
  bool allow_drift = false;
  /// Start again from step 0 under the same id when no checkpoint exists (refused otherwise:
  /// a resume that silently restarts would look like one that continued).
  bool from_scratch = false;
  OpenStore open_store;
  /// With a server as --db (open_store then opens this node's store): opens the server, only read
  /// to say where a run that this node's store does not hold, or holds otherwise, is (empty: no
  /// server).
  OpenStore open_team_store;
  /// Called once the run is found and checked, before anything changes: the CLI starts shipping
  /// to the server here, so a refused resume ships nothing and what it said about the server is
  /// what the server held.
  std::function<void()> on_checked;
  /// Hears what the run reports (null: nobody); it outlives the call.
  RunObserver* observer = nullptr;
};

/// How an invocation ended.
struct RunResult {
  util::ExitCode exit_code = util::ExitCode::ok;
  /// The run as recorded at the end; none when it was refused before anything was recorded, or
  /// for a rank other than 0 under an external launcher.
  std::optional<store::RunRecord> run;
  nlohmann::json summary = nlohmann::json::object();
  /// Refused because the machine differs from the spec's pins (exit 3): every pin row.
  std::vector<env::VerifyRow> pin_rows;
  /// Refused because the machine differs from the run's recorded fingerprint (exit 3).
  std::vector<env::DiffRow> stack_drift;
  /// With pin_rows or stack_drift: the one-line error to print.
  std::string refusal;
};

/// Validates the spec, holds the machine against its pins, records a new run and trains it on
/// this node's ranks (or, under an external launcher, as this process's rank). Input errors
/// throw util::Failure (exit 2) before anything is recorded.
RunResult run_spec(const RunRequest& request);

/// Continues a run that is interrupted, failed or lost, from the newest checkpoint step every
/// rank holds intact. Throws UsageError (exit 2, the run untouched) for a run that cannot be
/// resumed, naming why (status, or the unusable checkpoint file).
RunResult resume_run(const ResumeRequest& request);

/// What `expctl run SPEC --slurm` and `expctl resume RUN --slurm` ask of the Slurm job
/// (docs/slurm.md): the job runs expctl's own supervisor, which starts the node's ranks.
struct SlurmSubmit {
  std::vector<std::string> global_options;  ///< how the job's expctl opens the store: --db PATH [--runs-dir DIR]
  std::string time_limit;                   ///< sbatch --time; empty: the partition's default
  std::string partition;
  std::string account;
  int cpus_per_rank = 1;
  std::chrono::seconds signal_lead{90};  ///< --signal=TERM@LEAD: the warning before the time limit
  std::vector<std::string> directives;   ///< more #SBATCH options
  /// A team server as --db: handed to the job in sbatch's environment as EXPCTL_DB (never in the
  /// script or on a command line: a password may be in it); the job records into the node store
  /// of global_options' --local-db, shared with this node, and ships to the server.
  std::string team_server;
};

/// A run handed to Slurm: recorded `queued` with its job.
struct SlurmSubmission {
  store::RunRecord run;
  std::string job;
  std::filesystem::path script;
  std::filesystem::path output;  ///< the job's output file (%j left for Slurm to fill)
};

/// Validates the spec as `expctl run` does, records the run `queued` (no fingerprint yet: the job
/// takes its node's), writes the batch script into the run folder and submits it. A refused
/// submission removes the run again and throws util::Failure naming sbatch's error.
SlurmSubmission submit_run_to_slurm(const RunRequest& request, const SlurmSubmit& job);
/// The same for an interrupted, failed or lost run (`resume --slurm`): checked as `expctl resume`
/// checks it, queued again, and resumed by the job from its checkpoint.
SlurmSubmission submit_resume_to_slurm(const ResumeRequest& request, const SlurmSubmit& job);

/// Follows a submitted run until it ends (`--wait`): each change of its status (queued, running,
/// queued again after a requeue) goes to the observer; `stopped` returning true stops following
/// (the job runs on: exit 130). A job that ends before it started the run leaves the run
/// `failed`, naming the job's state and output file.
RunResult follow_slurm_run(const OpenStore& open_store, const SlurmSubmission& submission, RunObserver& observer,
                           const std::function<bool()>& stopped);

/// `expctl slurm_job RUN`, what the batch script runs on each node: starts the queued run (its
/// first start records this node's fingerprint), or resumes it from its checkpoint when Slurm
/// started the job again; a stop signal is read against the job's state: a requeue or preemption
/// leaves the run `queued`, a time limit near requeues the job, a cancel leaves it `interrupted`.
struct SlurmJobRequest {
  std::string run_id;
  bool allow_drift = false;
  std::chrono::seconds signal_lead{90};
  OpenStore open_store;
  RunObserver* observer = nullptr;
};
RunResult start_slurm_job(const SlurmJobRequest& request);

/// The Slurm job a run was last submitted as (its newest slurm-job:<id> tag), if any.
std::optional<std::string> slurm_job_of(const store::RunRecord& run);
/// A `run --slurm` of several nodes: the runs of nodes 1..N-1 that its job recorded so far, each
/// tagged node:<I> and node-of:<head_run> (node 0's run, the one submitted).
std::vector<store::RunRecord> slurm_node_runs(const store::Store& store, const std::string& head_run);

/// The tag a run whose ranks an external launcher started carries ("launcher:torchrun",
/// "launcher:slurm"), and the launcher it names on a run (none for a run of expctl's own ranks).
std::string launcher_tag(const std::string& launcher);
std::optional<std::string> external_launcher(const store::RunRecord& run);

/// One rank started by expctl's supervisor (`expctl worker`): trains and reports through the
/// control channel. Returns the process's exit code (launch::k_diverged_exit_code when the loss
/// stopped being finite). `run_dir` "-": it comes as one line on standard input (a rank started
/// before its run was recorded, see launch::HeldRanks); end of input without it returns 0.
/// `observer` gets the trainer's lines as output() (the rank's own output) and a divergence as
/// error(); `stop` is armed once the run folder is known.
int run_rank(const std::filesystem::path& run_dir, bool resume, RunObserver& observer, RankStop& stop);

}  // namespace expctl::run
