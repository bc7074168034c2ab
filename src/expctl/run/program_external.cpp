// A program's ranks under an external launcher (torchrun, mpirun, srun): every rank's `expctl run`
// starts the program as that rank; global rank 0 records the run, the others hand their ranks'
// steps and logs over at the end (program_run.cpp).

#include <fstream>

#include <fmt/format.h>

#include "expctl/launch/launch_plan.hpp"
#include "expctl/run/lifecycle.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/temporary_folder.hpp"

namespace expctl::run::lifecycle {
namespace {

using nlohmann::json;

// Under an external launcher every rank's `expctl run` starts the program as that rank. The store
// the program's ranks meet in is torchrun's agent's when it hosts one (TORCHELASTIC_USE_AGENT_STORE),
// else global rank 0's `expctl run` hosts it on MASTER_PORT, as torchrun's agent would. Rank 0
// publishes the run's id there once it is recorded, and the others hand their steps over at the end.
Invocation external_program_invocation(SteadyClock::time_point started, const RunRequest& request,
                                       const spec::Spec& spec, const launch::RankIdentity& identity) {
  Invocation invocation;
  invocation.started = started;
  invocation.program = true;
  invocation.observer = &observer_or_silent(request.observer);
  invocation.resolved.spec = resolved_values(spec, request.tensorboard);
  invocation.resolved.spec_file = std::filesystem::absolute(spec.file()).string();
  plan_external(invocation, identity);
  invocation.store_host = identity.agent_store ? StoreHost::launcher : StoreHost::expctl;
  const auto timeout = timeout_of(invocation.resolved.spec);
  invocation.handover =
      Handover{identity.master_addr, identity.master_port, identity.rank, identity.world_size, "rank", "", timeout};
  if (identity.agent_store) {
    const auto attempt = launch::lookup(launch::current_environment(), "TORCHELASTIC_RESTART_COUNT");
    invocation.handover->prefix = fmt::format("attempt-{}/", attempt.value_or("0"));
  }
  train::plugin::preload();
  if (identity.rank == 0 && !identity.agent_store) {
    invocation.rendezvous = std::make_shared<Rendezvous>();
    try {
      invocation.rendezvous->server = std::make_unique<train::plugin::StoreServer>(identity.master_port, timeout);
    } catch (const util::TrainError& error) {
      throw util::UsageError(fmt::format("{} (MASTER_PORT from {})", error.what(), identity.launcher));
    }
  }
  return invocation;
}

std::string tail_of(const std::filesystem::path& file, std::size_t bytes) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

// A rank other than 0: nothing is recorded here. The program's files and logs live in a temporary
// folder (its lines also reach the launcher's output as `[rank N] ...`); its steps go to rank 0.
RunResult run_program_as_other_rank(Invocation& invocation) {
  RunObserver& observer = *invocation.observer;
  const Handover& handover = *invocation.handover;
  const int rank = handover.index;
  std::optional<json> published;
  try {
    train::plugin::StoreClient client(handover.host, handover.port, handover.timeout);
    if (const auto text = client.get(handover.prefix + k_program_run_key, handover.timeout)) {
      published = json::parse(*text, nullptr, false);
    }
  } catch (const util::Failure&) {
  }
  RunResult result;
  if (!published || !published->is_object()) {
    observer.error(
        fmt::format("rank {}: rank 0 did not publish its run at {}:{} within {} s: check that global "
                    "rank 0 runs `expctl run` with the same spec and store (its own output says why it "
                    "stopped); no program was started on this rank",
                    rank, handover.host, handover.port, handover.timeout.count()));
    result.exit_code = util::ExitCode::run_failed;
    return result;
  }
  const std::filesystem::path scratch = util::make_temporary_folder(fmt::format("expctl-rank{}-", rank));
  invocation.run.id = published->at("run_id").get<std::string>();
  ProgramRecords records(nullptr, observer, /*keep=*/true);
  launch::SupervisorOptions options;
  options.log_dir = scratch / "logs";
  options.grace_period = std::chrono::seconds(3);
  options.heartbeat_timeout = handover.timeout;
  options.silence_counts_after_first_line = true;
  options.console = [&observer](std::string_view line) { observer.line(line); };
  options.on_record = [&records](int from, std::string_view line) { records.on_line(from, line); };
  options.on_unresponsive = [&observer](int from, pid_t) {
    observer.note(fmt::format("rank {} stopped answering", from), true);
  };
  Verdict verdict;
  std::optional<launch::Outcome> outcome;
  try {
    launch::Supervisor supervisor(options);
    const ProgramLaunch where{invocation.run.id, scratch, published->at("checkpoint_dir").get<std::string>(), false,
                              invocation.store_host};
    supervisor.start(
        program_rank_specs(invocation.plan, invocation.resolved.spec, invocation.resolved.spec_file, where));
    outcome = supervisor.wait();
    verdict = verdict_of(*outcome, std::nullopt);
  } catch (const util::Failure& error) {
    verdict = {store::RunStatus::failed, util::ExitCode::run_failed, error.what()};
  }
  auto part = part_of(rank, records, outcome, verdict);
  part.log = tail_of(scratch / "logs" / fmt::format("rank-{}.log", rank), k_part_log_bytes);
  hand_over(handover, part, observer);
  observer.finish();
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  if (verdict.status != store::RunStatus::completed) {
    observer.note(fmt::format("rank {} of run {} {}: {}", rank, invocation.run.id, store::to_string(verdict.status),
                              verdict.root_cause),
                  true);
  }
  result.exit_code = verdict.exit_code;
  return result;
}

}  // namespace

RunResult run_program_as_external_rank(SteadyClock::time_point started, const RunRequest& request,
                                       const spec::Spec& spec, const StackCheck& stack,
                                       const launch::RankIdentity& identity) {
  Invocation invocation = external_program_invocation(started, request, spec, identity);
  invocation.drift = stack.drifted();
  if (identity.rank != 0) {
    return run_program_as_other_rank(invocation);
  }
  store::Store store = request.open_store();
  auto tags = request.tags;
  tags.push_back(launcher_tag(identity.launcher));
  invocation.run = record_new_run(store, spec, &stack, tags, invocation.resolved);
  const auto& handover = *invocation.handover;
  try {
    train::plugin::StoreClient client(handover.host, handover.port, handover.timeout);
    client.set(
        handover.prefix + k_program_run_key,
        json{{"run_id", invocation.run.id}, {"checkpoint_dir", (invocation.run.run_dir / "checkpoints").string()}}
            .dump());
  } catch (const util::Failure& error) {
    const Verdict verdict{store::RunStatus::failed, util::ExitCode::run_failed,
                          fmt::format("rank 0 cannot publish the run to the other ranks: {}", error.what())};
    return conclude(store, invocation, verdict, RunFacts{});
  }
  return supervise(store, invocation);
}

}  // namespace expctl::run::lifecycle
