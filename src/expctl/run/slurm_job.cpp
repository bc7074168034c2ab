// `expctl run SPEC --slurm` (and `resume RUN --slurm`): the run is recorded `queued` at submission
// and its batch job runs `expctl slurm_job RUN` (one task per node, expctl's own supervisor), which
// starts it — or, when Slurm started the job again after a requeue or a preemption, resumes it from
// the newest checkpoint every rank holds, under the same id. How a stopped job's run is recorded is
// decided from the job's state and times (launch::slurm::stop_cause), never from the signal.

#include "expctl/launch/slurm_job.hpp"

#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "expctl/run/lifecycle.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/run/resume_checks.hpp"
#include "expctl/run/slurm_nodes.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/interrupt_signals.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::run {
namespace {

using namespace lifecycle;
namespace slurm = launch::slurm;
namespace fs = std::filesystem;
using nlohmann::json;

std::string getenv_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// What the job script says; everything the job needs to find the run is its id and the store.
slurm::RunScript script_of(const store::RunRecord& run, const json& spec, const SlurmSubmit& job, bool allow_drift) {
  const json& distributed = spec.at("distributed");
  slurm::RunScript script;
  script.run_id = run.id;
  script.job_name = "expctl-" + run.name;
  script.executable = fs::read_symlink("/proc/self/exe").string();
  script.global_options = job.global_options;
  script.output = (run.run_dir / "logs" / "slurm-%j.out").string();
  script.working_dir = fs::current_path().string();
  script.nodes = static_cast<int>(distributed.at("nnodes").get<std::int64_t>());
  script.ranks_per_node = static_cast<int>(distributed.at("nproc_per_node").get<std::int64_t>());
  script.cpus_per_rank = job.cpus_per_rank;
  script.time_limit = job.time_limit;
  script.partition = job.partition;
  script.account = job.account;
  script.signal_lead = job.signal_lead;
  script.allow_drift = allow_drift;
  script.directives = job.directives;
  script.needs_team_server = !job.team_server.empty();
  return script;
}

// Writes the script into the run folder and submits it; the run waits as `queued` for the job.
SlurmSubmission submit(store::Store& store, const store::RunRecord& run, const slurm::RunScript& script,
                       const std::string& team_server, bool remove_on_refusal) {
  SlurmSubmission submission;
  submission.script = run.run_dir / "slurm-job.sh";
  submission.output = script.output;
  if (auto written = util::write_file_atomic(submission.script, slurm::render_run_script(script)); !written) {
    throw util::LaunchError(fmt::format("cannot write run {}'s job script: {}", run.id, written.error().message));
  }
  fs::permissions(submission.script, fs::perms::owner_exec, fs::perm_options::add);
  try {
    std::map<std::string, std::optional<std::string>> env;
    if (!team_server.empty()) {
      env["EXPCTL_DB"] = team_server;  // the job inherits sbatch's environment
    }
    submission.job = slurm::Client(env).submit(submission.script);
  } catch (const util::Failure& error) {
    if (remove_on_refusal) {
      store.remove_run(run.id);
      throw util::UsageError(fmt::format("Slurm refused run {}: {}; nothing was recorded", run.id, error.what()));
    }
    throw util::UsageError(
        fmt::format("Slurm refused to resume run {}: {}; the run is left as it was", run.id, error.what()));
  }
  store.add_tag(run.id, util::tag::slurm_job(submission.job));
  if (const auto at = submission.output.string().find("%j"); at != std::string::npos) {
    submission.output = submission.output.string().replace(at, 2, submission.job);
  }
  store.queue_run(run.id, fmt::format("waiting for Slurm job {}", submission.job));
  submission.run = store.run(run.id).value();
  return submission;
}

// ---------------------------------------------------------------------------------------------
// In the job.

int restart_count() {
  return static_cast<int>(std::strtol(getenv_or("SLURM_RESTART_COUNT", "0").c_str(), nullptr, 10));
}

// The newest checkpoint step every rank of this node holds intact (none: no checkpoint yet).
std::optional<std::int64_t> newest_checkpoint(const Invocation& invocation) {
  std::vector<int> ranks;
  for (const auto& rank : invocation.plan.ranks) {
    ranks.push_back(rank.rank);
  }
  return train::resume_point(invocation.run.run_dir / "checkpoints", ranks, invocation.run.id).step;
}

std::string checkpoint_text(const std::optional<std::int64_t>& step) {
  return step ? fmt::format("its checkpoint at step {}", *step) : std::string("step 0 (it holds no checkpoint yet)");
}

// An interrupted job, read against Slurm's word on why: a requeue or preemption Slurm acts on
// leaves the run `queued` (the job starts again and resumes it); a time limit near, or a
// preemption that only sent the signal, requeues the job from here when this start made progress
// (a start that never reaches a checkpoint would otherwise loop); a cancel leaves it interrupted.
void settle_stop(Verdict& verdict, const Invocation& invocation, const std::string& job,
                 std::chrono::seconds signal_lead, bool* requeue) {
  const bool node_zero = invocation.resolved.node.node_rank == 0;  // of several nodes, node 0 requeues
  if (verdict.status != store::RunStatus::interrupted) {
    return;
  }
  const auto checkpoint = newest_checkpoint(invocation);
  const std::string resume_hint =
      fmt::format("`expctl resume {} --slurm` continues it from {}", invocation.run.id, checkpoint_text(checkpoint));
  std::optional<slurm::JobInfo> info;
  try {
    info = slurm::Client().query(job);
  } catch (const util::Failure& error) {
    verdict.root_cause =
        fmt::format("stopped by a signal; Slurm could not say why ({}); {}", error.what(), resume_hint);
    return;
  }
  if (!info) {
    verdict.root_cause = fmt::format("stopped by a signal; Slurm no longer knows job {}; {}", job, resume_hint);
    return;
  }
  const slurm::StopCause cause = slurm::stop_cause(*info, signal_lead, restart_count());
  std::string named(slurm::stop_cause_name(cause));
  if (cause == slurm::StopCause::preempted && invocation.resolved.node.nnodes > 1) {
    // srun stops every node's task when one ends (--kill-on-bad-exit) with the same SIGTERM, the
    // job still running: from here that reads as a preemption's warning.
    named = "preempted, or another node's task ended (srun then stops every node's)";
  }
  const auto requeued_by_slurm = [&](const std::string& what) {
    verdict.status = store::RunStatus::queued;
    verdict.root_cause = fmt::format("{} (job {} {}): Slurm starts the job again, which resumes the run from {}", what,
                                     job, slurm::state_name(info->state), checkpoint_text(checkpoint));
  };
  switch (cause) {
    case slurm::StopCause::requeued:
    case slurm::StopCause::node_failure:
      requeued_by_slurm(named);
      return;
    case slurm::StopCause::preempted:
    case slurm::StopCause::time_limit: {
      if (info->state == slurm::JobState::preempted) {
        requeued_by_slurm(named);
        return;
      }
      const bool progressed = checkpoint && (!invocation.resume_step || *checkpoint > *invocation.resume_step);
      if (!progressed) {
        verdict.root_cause = fmt::format(
            "{} (job {}) before this start wrote a checkpoint: not requeued, which would "
            "only start it again; {}",
            named, job, resume_hint);
        return;
      }
      // Requeued once the run is recorded `queued` (requeue_job): Slurm's SIGTERM and SIGKILL that
      // follow a requeue must not meet a run half concluded.
      verdict.status = store::RunStatus::queued;
      verdict.root_cause = fmt::format("{} (job {}): expctl requeued the job, which resumes the run from {}", named,
                                       job, checkpoint_text(checkpoint));
      *requeue = node_zero;
      return;
    }
    case slurm::StopCause::cancelled:
      verdict.root_cause = fmt::format("job {} was cancelled; {}", job, resume_hint);
      return;
    case slurm::StopCause::failed:
    case slurm::StopCause::none:
      return;
  }
}

// After the run was recorded `queued` with the cause: asks Slurm to requeue the job (which then
// stops this process too: its SIGTERM is held from here on, the run being recorded). When Slurm
// refuses, the run ends `interrupted` instead, naming how to continue it.
void requeue_job(store::Store& store, const store::RunRecord& run, const std::string& job) {
  // Slurm's SIGTERM only wakes this process's signal pipe from here on, for the rest of it: the run
  // is recorded, what is left is saying so. (Never destroyed: the signal may come after any return.)
  static const auto* const held = new util::InterruptSignals();
  (void)held;
  try {
    slurm::Client().requeue(job);
  } catch (const util::Failure& error) {
    if (const auto again = slurm::Client().query(job); again && again->restarts > restart_count()) {
      return;  // Slurm requeued it meanwhile
    }
    store.finish_run(run.id, store::RunStatus::interrupted, util::to_int(util::ExitCode::interrupted),
                     fmt::format("{}; but requeueing job {} failed ({}): `expctl resume {} --slurm` continues it",
                                 run.root_cause, job, error.what(), run.id));
  }
}

// A refusal in the job leaves the run failed with the refusal's words: nobody else would end a
// queued run whose job gave up.
void fail_queued(store::Store& store, const std::string& run_id, const std::string& why, util::ExitCode code) {
  const auto run = store.run(run_id);
  if (run && run->status == store::RunStatus::queued) {
    store.finish_run(run_id, store::RunStatus::failed, util::to_int(code), why);
  }
}

RunResult start_job(const SlurmJobRequest& request, store::Store& store, RunObserver& observer) {
  const std::string job = getenv_or("SLURM_JOB_ID", "");
  if (job.empty()) {
    throw util::UsageError(
        fmt::format("expctl slurm_job runs inside the Slurm job that `expctl run --slurm` "
                    "submitted (SLURM_JOB_ID is not set); to continue run {} here, "
                    "`expctl cancel {}` and then `expctl resume {}`",
                    request.run_id, request.run_id, request.run_id));
  }
  Invocation invocation;
  invocation.started = invocation_start();
  invocation.observer = &observer;
  invocation.run = store.run(request.run_id).value_or(store::RunRecord{});
  if (invocation.run.id.empty()) {
    throw util::UsageError(fmt::format("no run {} in {}", request.run_id, store.location()));
  }
  const auto& tags = invocation.run.tags;
  if (std::find(tags.begin(), tags.end(), util::tag::slurm_job(job)) == tags.end()) {
    throw util::UsageError(
        fmt::format("run {} was not submitted as Slurm job {} (its tags name no {}): this job "
                    "does not start it",
                    request.run_id, job, util::tag::slurm_job(job)));
  }
  invocation.resolved = read_resolved_run(invocation.run.run_dir);
  // What trains is what was submitted: a spec, program or data file edited since fails the run.
  check_resumed_inputs(store, invocation.run, invocation.resolved);
  // Of several nodes, node I > 0 starts (or resumes) a run of its own, node 0's being the one submitted.
  invocation.resolved.node = slurm_node(invocation.resolved.node, job);
  if (invocation.resolved.node.node_rank > 0) {
    invocation.run = node_run(store, invocation.run, invocation.resolved, invocation.resolved.node.node_rank, job);
  }
  const store::RunStatus status = invocation.run.status;
  const bool queued = status == store::RunStatus::queued;
  // Killed without a word (a node failure, SIGKILL) and started again by Slurm: lost, resumed.
  if (!queued && status != store::RunStatus::lost && status != store::RunStatus::interrupted) {
    throw util::UsageError(fmt::format("run {} is {}: Slurm job {} does not start it again", invocation.run.id,
                                       store::to_string(status), job));
  }
  invocation.sandbox = check_sandbox(invocation.resolved.spec, "the run",
                                     [&observer](const std::string& text) { observer.note(text, true); });
  const bool first = !invocation.run.environment_hash.has_value();
  invocation.program = spec::has_program(invocation.resolved.spec);
  if (invocation.program) {
    check_program_launchable(invocation.resolved.spec, invocation.resolved.spec_file);
  }
  if (invocation.program) {
    prepare_program_nodes(invocation);
  } else {
    invocation.rendezvous = host_rendezvous(invocation.resolved.node, timeout_of(invocation.resolved.spec));
  }
  plan_node(invocation);
  invocation.resume = !first;
  if (invocation.resume && !invocation.program) {
    check_checkpoints(invocation, /*from_scratch=*/true);  // a start killed before its first checkpoint: step 0
  }
  // The ranks start now and load LibTorch while the node is fingerprinted and the run recorded;
  // they learn the run's folder once it is running (a refusal below kills them).
  std::optional<launch::HeldRanks> held;
  if (!invocation.program) {
    held.emplace(launch::rank_specs(invocation.plan, worker_argv("-", invocation.resume)));
  }
  train::plugin::preload();
  std::optional<std::string> environment;
  if (first) {
    // The node's fingerprint, held against the spec's pins, is the run's from now on.
    const spec::Spec spec = spec::rehash_values(invocation.resolved.spec, invocation.resolved.spec_file);
    const StackCheck stack = check_pinned_stack(spec);
    if (!stack.drifted().empty() && !request.allow_drift) {
      RunResult result;
      result.exit_code = util::ExitCode::mismatch;
      result.pin_rows = stack.rows;
      result.refusal = fmt::format(
          "run {}: node {} does not match the pinned stack ({} of {} pins differ): fix the nodes' environment, or "
          "submit with --allow-drift to record the drift on the run",
          invocation.run.id, getenv_or("SLURMD_NODENAME", "?"), stack.drifted().size(), stack.rows.size());
      fail_queued(store, invocation.run.id, result.refusal, result.exit_code);
      return result;
    }
    store.put_environment(stack.fingerprint_hash, stack.fingerprint.dump());
    environment = stack.fingerprint_hash;
    invocation.drift = stack.drifted();
  } else if (const auto drift = resume_drift(store, invocation.run, invocation.resolved);
             !drift.empty() && !request.allow_drift) {
    RunResult result;
    result.exit_code = util::ExitCode::mismatch;
    result.stack_drift = drift;
    result.refusal = fmt::format(
        "run {} started on a different stack than node {} has ({} fingerprint field(s) differ): the requeued job "
        "cannot resume it bit for bit; pin the job to alike nodes, or resume it with --allow-drift",
        invocation.run.id, getenv_or("SLURMD_NODENAME", "?"), drift.size());
    fail_queued(store, invocation.run.id, result.refusal, result.exit_code);
    return result;
  }
  if (invocation.resume) {  // the summary's invocation_causes (supervised.cpp names a plain resume's)
    invocation.cause = fmt::format("Slurm job {} started again (SLURM_RESTART_COUNT {})", job, restart_count());
  }
  // Waiting since the submission (or the requeue), as the wall clock says.
  const auto since = store::parse_utc(invocation.run.started_at);
  json slurm_facts = {{"job", job},
                      {"restarts", restart_count()},
                      {"node_list", getenv_or("SLURM_JOB_NODELIST", "")},
                      {"partition", getenv_or("SLURM_JOB_PARTITION", "")}};
  if (first && since) {  // to this process's start, which time_to_first_step_s counts from
    slurm_facts["queued_s"] =
        std::chrono::duration<double>(store::Clock::now() - *since).count() - seconds_since(invocation.started);
  }
  invocation.summary_extra["slurm"] = slurm_facts;
  if (queued) {
    store.start_queued_run(invocation.run.id, environment);
  } else {
    store.resume_run(invocation.run.id);
  }
  if (first) {
    add_drift_tags(store, invocation.run.id, invocation.drift);
  }
  bool requeue = false;
  invocation.settle = [&invocation, &requeue, job, lead = request.signal_lead](Verdict& verdict) {
    settle_stop(verdict, invocation, job, lead, &requeue);
  };
  RunResult result = supervise(store, invocation, std::move(held));
  if (requeue && result.run && result.run->status == store::RunStatus::queued) {
    requeue_job(store, *result.run, job);
    result.run = store.run(invocation.run.id);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Following a submitted run.

std::string job_words(const std::optional<slurm::JobInfo>& job) {
  if (!job) {
    return "gone from Slurm";
  }
  std::string words = std::string(slurm::state_name(job->state));
  if (!job->reason.empty() && job->reason != "None") {
    words += " (" + job->reason + ")";
  }
  if (!job->node_list.empty() && job->node_list != "(null)") {
    words += " on " + job->node_list;
  }
  return words;
}

}  // namespace

std::optional<std::string> slurm_job_of(const store::RunRecord& run) {
  std::optional<std::string> newest;
  for (const auto& tag : run.tags) {
    if (!tag.starts_with(util::tag::slurm_job_prefix)) {
      continue;
    }
    std::string job = tag.substr(util::tag::slurm_job_prefix.size());
    if (!newest || job.size() > newest->size() || (job.size() == newest->size() && job > *newest)) {
      newest = std::move(job);  // job ids grow: the numerically greatest is the newest
    }
  }
  return newest;
}

std::vector<store::RunRecord> slurm_node_runs(const store::Store& store, const std::string& head_run) {
  return node_runs(store, head_run);
}

SlurmSubmission submit_run_to_slurm(const RunRequest& request, const SlurmSubmit& job) {
  RunObserver& observer = observer_or_silent(request.observer);
  const spec::Spec spec = spec::load_spec(request.spec_file, load_options(request));
  const Warn warn = [&observer](const std::string& text) { observer.note(text, true); };
  check_sandbox(spec.values(), "the run", warn);
  preflight_training(spec, warn);
  if (spec::has_program(spec.values())) {
    check_program_launchable(spec.values(), request.spec_file);
  }
  ResolvedRun resolved;
  resolved.spec = resolved_values(spec, request.tensorboard);
  resolved.inputs = spec.input_paths();
  resolved.spec_file = fs::absolute(request.spec_file).string();
  resolved.node = node_of(request, spec);
  store::Store store = request.open_store();
  // Recorded before the job exists (the script names the run); a refused sbatch removes it again.
  const auto run = record_new_run(store, spec, nullptr, request.tags, resolved);
  return submit(store, run, script_of(run, resolved.spec, job, request.allow_drift), job.team_server,
                /*remove_on_refusal=*/true);
}

SlurmSubmission submit_resume_to_slurm(const ResumeRequest& request, const SlurmSubmit& job) {
  store::Store store = request.open_store();
  // Before whether it may be resumed: a node's run ends with its node 0's, and is resumed with it.
  std::optional<std::string> head;
  try {
    head = head_of(store.find_run(request.selector));
  } catch (const util::Failure&) {
    // not here, or ambiguous: find_resumable_run says which
  }
  if (head) {
    throw util::UsageError(fmt::format("{} is one node's part of run {}: `expctl resume {} --slurm` resumes every node",
                                       request.selector, *head, *head));
  }
  const auto run = find_resumable_run(store, request.selector, request.open_team_store);
  const auto resolved = read_resolved_run(run.run_dir);
  check_resumed_inputs(store, run, resolved);
  if (external_launcher(run)) {
    throw util::UsageError(
        fmt::format("run {} was started by {}: only a run expctl's supervisor started can be "
                    "resumed by a Slurm job; start a new run",
                    run.id, *external_launcher(run)));
  }
  return submit(store, run, script_of(run, resolved.spec, job, request.allow_drift), job.team_server,
                /*remove_on_refusal=*/false);
}

RunResult follow_slurm_run(const OpenStore& open_store, const SlurmSubmission& submission, RunObserver& observer,
                           const std::function<bool()>& stopped) {
  store::Store store = open_store();
  const slurm::Client client;
  std::string said;
  int gone_polls = 0;
  while (true) {
    if (stopped()) {
      observer.error(fmt::format("stopped following run {}; Slurm job {} goes on (`expctl cancel {}` stops it)",
                                 submission.run.id, submission.job, submission.run.id));
      RunResult result;
      result.exit_code = util::ExitCode::interrupted;
      return result;
    }
    auto run = store.run(submission.run.id);
    if (!run) {
      throw util::StoreError(fmt::format("run {} is no longer in {}", submission.run.id, store.location()));
    }
    if (store::has_ended(run->status)) {
      RunResult result;
      result.exit_code = exit_code_of(run->status);
      result.summary = json::parse(run->summary_json, nullptr, false);
      result.run = std::move(run);
      return result;
    }
    std::optional<slurm::JobInfo> info;
    try {
      info = client.query(submission.job);
    } catch (const util::Failure& error) {
      observer.note(fmt::format("cannot ask Slurm about job {}: {}", submission.job, error.what()), true);
    }
    const std::string now = fmt::format("run {}: {}, Slurm job {} {}", run->id, store::to_string(run->status),
                                        submission.job, job_words(info));
    if (now != said) {
      observer.info(now);
      said = now;
    }
    // The job ended (or Slurm forgot it) while the run still waits: it never started the run,
    // which nobody else would end. Twice in a row, so that a requeue in flight is not taken for it.
    const bool job_over = !info || slurm::is_final(info->state);
    gone_polls = run->status == store::RunStatus::queued && job_over ? gone_polls + 1 : 0;
    if (gone_polls >= 2) {
      const std::string why = fmt::format(
          "Slurm job {} ended {} before it started the run{}; its output: {}", submission.job,
          info ? slurm::state_name(info->state) : "out of Slurm's sight",
          info && info->exit_code ? fmt::format(" (exit {})", *info->exit_code) : "", submission.output.string());
      store.finish_run(run->id, store::RunStatus::failed, util::to_int(util::ExitCode::run_failed), why);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

RunResult start_slurm_job(const SlurmJobRequest& request) {
  RunObserver& observer = observer_or_silent(request.observer);
  store::Store store = request.open_store();
  RunResult result;
  try {
    result = start_job(request, store, observer);
  } catch (const util::Failure& error) {
    fail_queued(store, request.run_id, error.what(), util::ExitCode::usage);
    throw;
  }
  observer.result(result);
  return result;
}

}  // namespace expctl::run
