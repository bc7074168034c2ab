#pragma once
/// Internal to run/: what the lifecycle files share. One file per lifecycle, each ending in the
/// one conclusion (record.cpp's conclude):
///   start.cpp        `expctl run`: validation, the pinned stack, and which lifecycle runs it
///   record.cpp       recording a new run, and concluding every run: artifacts, summary, status
///   supervised.cpp   supervising this node's ranks (the built-in trainer's and a program's)
///   external.cpp     the built-in trainer under an external launcher: rank 0 records the run
///   program_run.cpp  a program whose ranks several supervisors share: the handover at the end
///   program_external.cpp  a program under an external launcher: one `expctl run` per rank
///   resume.cpp       `expctl resume`
///   slurm_job.cpp    `run --slurm`: the run recorded queued at submission, started (and after a
///                    requeue resumed) by its job, which asks Slurm why it was stopped
///   restarts.cpp     distributed.max_restarts: this node's ranks started again after one died
/// A new lifecycle (a Slurm job) is a new file that builds an Invocation and ends in conclude().

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/env/verify.hpp"
#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/run/journal.hpp"
#include "expctl/run/observer.hpp"
#include "expctl/run/outcome.hpp"
#include "expctl/run/program.hpp"
#include "expctl/run/program_gather.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/run/rendezvous.hpp"
#include "expctl/run/resolved_run.hpp"
#include "expctl/run/stack.hpp"
#include "expctl/run/stop.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/train/checkpoint_files.hpp"

namespace expctl::run::lifecycle {

using SteadyClock = std::chrono::steady_clock;

/// When an invocation started: the first of this process at the process's start (loading
/// LibTorch is part of what a user waits for); any later one (`ab`, `nightly` and `sweep` run
/// several in one process) when it began, so that each run's wall_time_s and
/// time_to_first_step_s are its own.
SteadyClock::time_point invocation_start();
double seconds_since(SteadyClock::time_point start);

/// `given`, or an observer that hears nothing.
RunObserver& observer_or_silent(RunObserver* given);
/// `given`, or a stop flag nobody signals.
RankStop& stop_or_none(RankStop* given);

/// A program run whose ranks several `expctl` processes supervise (program_gather.hpp): where the
/// job's store is, which part this supervisor is, and how many there are.
struct Handover {
  std::string host;
  std::uint16_t port = 0;
  int index = 0;  ///< 0: this supervisor records the run and takes the others' parts
  int parts = 1;
  std::string noun = "node";  ///< what a part is: "node" (--nnodes) or "rank" (external launcher)
  /// Before every key: a store torchrun's agent keeps across restarts of its workers holds each
  /// attempt's keys apart ("attempt-N/").
  std::string prefix;
  std::chrono::seconds timeout{120};
};

/// Everything one invocation of a recorded run needs.
struct Invocation {
  store::RunRecord run;
  ResolvedRun resolved;
  bool resume = false;
  std::vector<env::VerifyRow> drift;  ///< drifted pins accepted with --allow-drift
  std::shared_ptr<Rendezvous> rendezvous;
  RunObserver* observer = nullptr;          ///< never null once the entry point set it
  std::optional<std::int64_t> resume_step;  ///< the checkpoint step a resume continues after
  bool program = false;  ///< the spec runs a user's program (program.command), not the built-in trainer
  /// Program runs: who hosts the store the program's ranks meet in.
  StoreHost store_host = StoreHost::rank0;
  /// Program runs of several supervisors: this one's place in the handover at the end.
  std::optional<Handover> handover;
  /// This node's ranks, planned once before anything is recorded; under an external launcher, the
  /// one rank this process is.
  launch::LaunchPlan plan;
  bool external = false;  ///< started by an external launcher (torchrun, mpirun, srun, Kubeflow)
  /// What this invocation's wall_time_s and time_to_first_step_s count from (invocation_start).
  SteadyClock::time_point started{};
  bool strict_inputs = false;  ///< run --strict-inputs: an unhashed local module fails the run
  std::string sandbox;         ///< what check_sandbox said, for the summary (util::summary_key::sandbox)
  /// Reads how the invocation ended once its ranks have (a Slurm job asks Slurm why it was
  /// stopped: slurm_job.cpp); may turn an interrupt into `queued` (the job starts again).
  std::function<void(Verdict&)> settle;
  /// More top-level summary fields this invocation records ("slurm": the job, its restarts).
  nlohmann::json summary_extra = nlohmann::json::object();
  /// Why this invocation started, when not as a new run's first: "expctl resume: ...", "restart 1 of
  /// 2: rank 1 was killed by SIGKILL after step 37; ..." (the summary's invocation_causes).
  std::string cause;
  int restart = 0;  ///< which restart of this command's ranks (distributed.max_restarts); 0: none
};

// start.cpp ----------------------------------------------------------------------------------

/// How `expctl run`'s options load the spec (--set, --nnodes).
spec::LoadOptions load_options(const RunRequest& request);
/// This node's part of the run as `expctl run`'s options and the spec say.
launch::LaunchRequest node_of(const RunRequest& request, const spec::Spec& spec);

// record.cpp ---------------------------------------------------------------------------------

/// The spec as the run records it: `run --tensorboard DIR` in place of the spec's
/// metrics.tensorboard (a location, so the hash never held it), made absolute.
nlohmann::json resolved_values(const spec::Spec& spec, const std::filesystem::path& tensorboard);
/// Live TensorBoard event files (metrics.tensorboard), when the run asks for them.
void export_tensorboard(Recorder& recorder, const store::Store& store, const Invocation& invocation, int world_size);
/// Records a new run (spec, environment, tags, resolved.json in its folder); without `stack` (a
/// Slurm job fingerprints its node when it starts) the run is recorded `queued`.
store::RunRecord record_new_run(store::Store& store, const spec::Spec& spec, const StackCheck* stack,
                                const std::vector<std::string>& tags, const ResolvedRun& resolved);
/// Tags the run drift:<field> for each pin accepted with --allow-drift.
void add_drift_tags(store::Store& store, const std::string& run_id, const std::vector<env::VerifyRow>& drifted);
/// The artifacts and the summary of the run's invocations so far, this one's included, stored; the
/// run's status stays as it is (conclude's first part; a restart's attempt ends with it). Returns
/// the summary. Throws util::Failure when the store cannot take it.
nlohmann::json store_summary(store::Store& store, const Invocation& invocation, const RunFacts& facts,
                             const nlohmann::json& extra_summary, RecordJournal* journal);
/// How every recorded invocation ends: artifacts, summary, then status and root cause, last.
/// `journal`: this invocation's (null under an external launcher).
RunResult conclude(store::Store& store, const Invocation& invocation, const Verdict& verdict, const RunFacts& facts,
                   const nlohmann::json& extra_summary = nlohmann::json::object(), RecordJournal* journal = nullptr);

// supervised.cpp -----------------------------------------------------------------------------

/// The `expctl worker` command line of this node's ranks (`run_dir` "-": they read it from stdin).
std::vector<std::string> worker_argv(const std::string& run_dir, bool resume);
/// Plans this node's ranks once, after the rendezvous.
void plan_node(Invocation& invocation);
/// distributed.timeout_s: the collective and rendezvous timeout.
std::chrono::seconds timeout_of(const nlohmann::json& spec);
/// Supervises this node's ranks (`held`: started before the run was recorded), restarting them as
/// distributed.max_restarts allows (`invocation` is then the last attempt), and concludes.
RunResult supervise(store::Store& store, Invocation& invocation, std::optional<launch::HeldRanks> held = std::nullopt);

// restarts.cpp -------------------------------------------------------------------------------

/// Where a resume or restart of this node's ranks starts: the newest checkpoint step every rank
/// holds intact (train::resume_point over the plan's ranks).
train::ResumePoint node_resume_point(const Invocation& invocation);
/// The death of a rank that a restart may cure ("rank 1 was killed by SIGKILL after step 37"), or
/// nullopt: the ranks completed, diverged or were interrupted, the store failed, the run timed out.
std::optional<std::string> rank_death(const launch::Outcome& outcome, const Verdict& verdict,
                                      const std::map<int, std::int64_t>& last_steps);
/// After an attempt that ended in `death`: when distributed.max_restarts allows another, stores
/// the attempt's summary with the run still running, ends its journal, makes `invocation` the next
/// attempt (resumed from node_resume_point, its cause set) and returns true. Otherwise false, and
/// `verdict`'s root cause says why a death was not restarted (the restarts used, no intact step).
bool restart_after(store::Store& store, Invocation& invocation, const std::optional<std::string>& death,
                   Verdict& verdict, const RunFacts& facts, const nlohmann::json& summary, RecordJournal& journal);

// resume.cpp ---------------------------------------------------------------------------------

/// Refuses (UsageError) before anything changes when this node's ranks hold checkpoints but no
/// step is intact on all of them, or none at all unless `from_scratch`; sets resume_step.
void check_checkpoints(Invocation& invocation, bool from_scratch);

// external.cpp -------------------------------------------------------------------------------

/// Under an external launcher: the one rank this process is, and the node's part of the run.
void plan_external(Invocation& invocation, const launch::RankIdentity& identity);
/// The built-in trainer as this process's rank; global rank 0 records the run.
RunResult run_as_external_rank(SteadyClock::time_point started, const RunRequest& request, const spec::Spec& spec,
                               const StackCheck& stack, const launch::RankIdentity& identity);

// program_run.cpp ----------------------------------------------------------------------------

/// Several nodes started with --nnodes: node 0 hosts the program's store, the others hand over.
void prepare_program_nodes(Invocation& invocation);
/// What this supervisor's program ranks did, to hand over to the one that records the run.
ProgramPart part_of(int index, const ProgramRecords& records, const std::optional<launch::Outcome>& outcome,
                    const Verdict& verdict);
/// Hands a part to the job's store (a failure costs a warning, not the run).
void hand_over(const Handover& handover, const ProgramPart& part, RunObserver& observer);
/// After a program's ranks ended here: hands this supervisor's part over or takes the others',
/// names unhashed modules (failing the run under --strict-inputs), and returns the summary's
/// program section.
nlohmann::json end_program(const Invocation& invocation, const ProgramRecords& records, Recorder& recorder,
                           const std::optional<launch::Outcome>& outcome, Verdict& verdict);

// program_external.cpp -----------------------------------------------------------------------

/// A program's ranks under an external launcher: rank 0 records, the others hand their steps over.
RunResult run_program_as_external_rank(SteadyClock::time_point started, const RunRequest& request,
                                       const spec::Spec& spec, const StackCheck& stack,
                                       const launch::RankIdentity& identity);

}  // namespace expctl::run::lifecycle
