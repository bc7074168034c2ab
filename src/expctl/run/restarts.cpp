// distributed.max_restarts: when a rank of this node dies, every rank is stopped (the supervisor
// fails fast) and all start again from the newest checkpoint step every rank holds intact, under
// the same run id, up to N times (torchrun's --max_restarts). Each start is an invocation of the
// run, recorded like a resume's: the invocation before it stores its summary with the run still
// running, the journal marks it ended, and the summary names the new one's cause.

#include <fmt/format.h>

#include "expctl/run/lifecycle.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run::lifecycle {
namespace {

using nlohmann::json;

int max_restarts_of(const json& spec) {
  return static_cast<int>(spec.at("distributed").at("max_restarts").get<std::int64_t>());
}

// Appended to the first line of the root cause (before the rank's last lines).
void add_to_cause(Verdict& verdict, const std::string& text) {
  auto& cause = verdict.root_cause;
  cause.insert(std::min(cause.find('\n'), cause.size()), text);
}

std::string times(int count) {
  return count == 1 ? "1 restart" : fmt::format("{} restarts", count);
}

// Where the next attempt starts, as its cause says it.
std::string start_point(const Invocation& invocation) {
  if (invocation.program) {
    return "its program starts again with EXPCTL_RESUME=1";
  }
  return invocation.resume_step ? fmt::format("resumed from its checkpoint at step {}", *invocation.resume_step)
                                : std::string("restarted from step 0 (no checkpoint is held by every rank yet)");
}

}  // namespace

train::ResumePoint node_resume_point(const Invocation& invocation) {
  std::vector<int> ranks;
  for (const auto& rank : invocation.plan.ranks) {
    ranks.push_back(rank.rank);
  }
  return train::resume_point(invocation.run.run_dir / "checkpoints", ranks, invocation.run.id);
}

std::optional<std::string> rank_death(const launch::Outcome& outcome, const Verdict& verdict,
                                      const std::map<int, std::int64_t>& last_steps) {
  // A rank's own failure: not a divergence (the same step fails again), an interrupt (the user's
  // or a scheduler's), a store that can no longer be written or the run's time limit (no rank).
  if (outcome.status != launch::RunStatus::failed || verdict.status != store::RunStatus::failed ||
      outcome.interrupt_signal || !outcome.root_cause || !outcome.root_cause->rank) {
    return std::nullopt;
  }
  const auto step = last_steps.find(*outcome.root_cause->rank);
  return step == last_steps.end() ? outcome.root_cause->description
                                  : fmt::format("{} after step {}", outcome.root_cause->description, step->second);
}

bool restart_after(store::Store& store, Invocation& invocation, const std::optional<std::string>& death,
                   Verdict& verdict, const RunFacts& facts, const json& summary, RecordJournal& journal) {
  const int allowed = max_restarts_of(invocation.resolved.spec);
  // Under an external launcher this process supervises one rank of a job it did not start: the
  // launcher's own restarts apply (torchrun's --max_restarts, Slurm's requeue).
  if (!death || verdict.status != store::RunStatus::failed || allowed == 0 || invocation.external ||
      invocation.handover) {
    return false;
  }
  if (invocation.restart >= allowed) {
    add_to_cause(verdict, fmt::format("; not restarted again: {} of {} (distributed.max_restarts) used",
                                      times(invocation.restart), allowed));
    return false;
  }
  Invocation next = invocation;  // the next attempt, taken only once it can start
  try {
    if (next.resolved.node.nnodes == 1) {
      next.resolved.node.master_port = 0;  // the last attempt's port may linger in TIME_WAIT
    }
    next.rendezvous.reset();
    if (!next.program) {
      next.rendezvous = host_rendezvous(next.resolved.node, timeout_of(next.resolved.spec));
    }
    plan_node(next);
    if (!next.program) {
      const auto point = node_resume_point(next);
      if (!point.refusal.empty()) {
        add_to_cause(verdict, fmt::format("; not restarted: {}", point.refusal));
        return false;
      }
      if (!point.note.empty()) {
        invocation.observer->info(fmt::format("note: run {}: {}", invocation.run.id, point.note));
      }
      next.resume_step = point.step;
    }
    // This attempt ends like an invocation (its summary stored, its journal ended), but the run
    // stays running: nobody reading the store sees it failed while it restarts.
    (void)store_summary(store, invocation, facts, summary, &journal);
    journal.end();
    next.run = store.find_run(invocation.run.id);  // the summary the next attempt adds to
  } catch (const util::Failure& error) {
    add_to_cause(verdict, fmt::format("; not restarted: {}", error.what()));
    return false;
  }
  ++next.restart;
  next.resume = true;
  next.cause = fmt::format("restart {} of {}: {}; {}", next.restart, allowed, *death, start_point(next));
  next.started = SteadyClock::now();
  invocation = std::move(next);
  return true;
}

}  // namespace expctl::run::lifecycle
