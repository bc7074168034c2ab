// `expctl resume RUN`: the run found and checked (inputs, stack, checkpoints) before anything
// changes, then this node's ranks supervised again under the same id (supervised.cpp).

#include <fmt/format.h>

#include "expctl/run/lifecycle.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/run/resume_checks.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {
namespace {

using namespace lifecycle;

RunResult resume(const ResumeRequest& request, RunObserver& observer) {
  store::Store store = request.open_store();
  Invocation invocation;
  invocation.started = invocation_start();
  invocation.observer = &observer;
  invocation.run = find_resumable_run(store, request.selector, request.open_team_store);
  invocation.resolved = read_resolved_run(invocation.run.run_dir);
  // What would train must be what the run started as, by the hash the store holds for it. The
  // inputs' digests are remembered (util::file_digest), so this costs a stat per file; LibTorch
  // starts loading only after it, so a refused resume never loads it. (Refusals after the preload
  // exit only once the load has ended: cli::run waits for it, train::plugin::settle.)
  check_resumed_inputs(store, invocation.run, invocation.resolved);
  invocation.sandbox = check_sandbox(invocation.resolved.spec, "the run",
                                     [&observer](const std::string& text) { observer.note(text, true); });
  train::plugin::preload();
  // A resumed run continues bit for bit only on the stack it started on.
  const auto drift = resume_drift(store, invocation.run, invocation.resolved);
  if (!drift.empty() && !request.allow_drift) {
    RunResult result;
    result.exit_code = util::ExitCode::mismatch;
    result.stack_drift = drift;
    result.refusal = fmt::format(
        "run {} was recorded on a different stack ({} fingerprint field(s) differ): resume it where it started, or "
        "pass --allow-drift to continue anyway and record the drift on the run",
        invocation.run.id, drift.size());
    return result;
  }
  invocation.program = spec::has_program(invocation.resolved.spec);
  if (invocation.program) {
    if (const auto launcher = external_launcher(invocation.run)) {
      throw util::UsageError(fmt::format(
          "run {} was started by {}, one `expctl run` per rank: it cannot be resumed by one process; start a new "
          "run under the launcher (the program may read its checkpoints from {})",
          invocation.run.id, *launcher, (invocation.run.run_dir / "checkpoints").string()));
    }
    // The program keeps its own checkpoints in EXPCTL_CHECKPOINT_DIR and finds them on EXPCTL_RESUME=1.
    check_program_launchable(invocation.resolved.spec, invocation.resolved.spec_file);
  }
  if (invocation.resolved.node.nnodes == 1) {
    invocation.resolved.node.master_port = 0;  // the old port may be taken by now
  }
  if (invocation.program) {
    prepare_program_nodes(invocation);
  } else {
    invocation.rendezvous = host_rendezvous(invocation.resolved.node, timeout_of(invocation.resolved.spec));
  }
  plan_node(invocation);
  if (!invocation.program) {
    check_checkpoints(invocation, request.from_scratch);  // against the plan's ranks, before the store changes
  }
  invocation.resume = true;
  if (request.on_checked) {
    request.on_checked();
  }
  store.resume_run(invocation.run.id);
  for (const auto& row : drift) {
    store.add_tag(invocation.run.id, "drift:" + row.field);
  }
  return supervise(store, invocation);
}

}  // namespace

// Refuses before anything changes when this node's ranks hold checkpoints but no step is intact
// on all of them (the ranks then pick that step collectively, across nodes too).
void lifecycle::check_checkpoints(Invocation& invocation, bool from_scratch) {
  const auto point = node_resume_point(invocation);
  if (!point.refusal.empty()) {
    throw util::UsageError(
        fmt::format("run {} cannot be resumed: {}; no checkpoint step is intact on every rank, "
                    "so start a new run",
                    invocation.run.id, point.refusal));
  }
  const auto launcher = external_launcher(invocation.run);
  if (!point.step && !from_scratch && launcher && invocation.plan.ranks.size() > 1) {
    // Under an external launcher only global rank 0 knows the run and writes checkpoints.
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: an external launcher started its ranks ({}), and under one only rank 0 "
        "writes checkpoints, so no step is held by every rank (docs/slurm.md, \"Not yet\"); start a new run, "
        "or `expctl resume {} --from-scratch` to train it again from step 0 under the same id",
        invocation.run.id, launcher_tag(*launcher), invocation.run.id));
  }
  if (!point.step && !from_scratch) {
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: it has no checkpoint (it was killed before its first; train.checkpoint_every_s "
        "and train.checkpoint_every write them); `expctl resume {} --from-scratch` starts it again from step 0 "
        "under the same id",
        invocation.run.id, invocation.run.id));
  }
  if (!point.note.empty()) {
    invocation.observer->info(fmt::format("note: run {}: {}", invocation.run.id, point.note));
  }
  invocation.resume_step = point.step;
}

RunResult resume_run(const ResumeRequest& request) {
  RunObserver& observer = lifecycle::observer_or_silent(request.observer);
  RunResult result = resume(request, observer);
  observer.result(result);
  return result;
}

}  // namespace expctl::run
