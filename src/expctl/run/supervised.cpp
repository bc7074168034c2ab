// Supervising this node's ranks (the built-in trainer's `expctl worker`s, or a program's ranks):
// the recorder stores their records as they come, the journal keeps them until they are stored,
// and the run ends in conclude (record.cpp).

#include <map>
#include <string_view>

#include <fmt/format.h>

#include "expctl/run/forensics.hpp"
#include "expctl/run/lifecycle.hpp"
#include "expctl/run/stack.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::run::lifecycle {
namespace {

using nlohmann::json;

// A rank silent this long has stopped (its heartbeat thread beats every 250 ms even while a
// collective waits): well inside the collective timeout, so the stopped rank is named rather
// than the healthy peer whose collective timed out waiting for it.
std::chrono::milliseconds heartbeat_timeout(const json& spec) {
  return std::chrono::seconds(std::clamp<std::int64_t>(timeout_of(spec).count() / 3, 5, 60));
}

void record_ranks(Recorder& recorder, const Invocation& invocation, const launch::LaunchPlan& plan,
                  const std::vector<pid_t>& pids) {
  recorder.post([id = invocation.run.id, plan, pids, host = util::host_name()](store::Store& store) {
    std::map<int, bool> known;
    for (const auto& rank : store.ranks(id)) {
      known[rank.rank] = true;
    }
    for (std::size_t index = 0; index < plan.ranks.size() && index < pids.size(); ++index) {
      const int rank = plan.ranks[index].rank;
      if (known.contains(rank)) {
        store.update_rank(id, rank, store::RunStatus::running, std::nullopt, std::nullopt);
      } else {
        store.add_rank(id, store::RankRecord{.rank = rank, .host = host, .pid = pids[index]});
      }
    }
  });
}

launch::SupervisorOptions supervisor_options(const Invocation& invocation, RunObserver& observer, Recorder& recorder,
                                             std::string& stack_note) {
  launch::SupervisorOptions options;
  options.log_dir = invocation.run.run_dir / "logs";
  options.grace_period = std::chrono::seconds(3);
  options.heartbeat_timeout = heartbeat_timeout(invocation.resolved.spec);
  if (invocation.program) {
    // A program's heartbeats come from the `expctl` module while its main thread moves; one that
    // never speaks the protocol is not judged at all (docs/program.md).
    options.heartbeat_timeout = timeout_of(invocation.resolved.spec);
    options.silence_counts_after_first_line = true;
  }
  options.console = [&observer](std::string_view line) { observer.line(line); };
  options.on_record = [&recorder](int rank, std::string_view payload) { recorder.on_record(rank, payload); };
  // sys_cpu_percent and sys_rss_mb (sys_gpu_* on a GPU) once a second (EXPCTL_SYS_METRICS=0 turns them off: a switch
  // for measuring what they cost, bench/sys_metrics.sh).
  if (Recorder::usage_wanted()) {
    options.usage_every = std::chrono::seconds(1);
    options.on_usage = [&recorder](int rank, const launch::UsageRate::Sample& sample) {
      recorder.on_usage(rank, sample);
    };
  }
  options.abort_check = [&recorder]() -> std::optional<std::string> {
    const auto fatal = recorder.fatal_error();
    return fatal ? std::optional<std::string>("cannot record the run's metrics: " + *fatal) : std::nullopt;
  };
  options.on_unresponsive = [&recorder, &observer, &invocation, &stack_note](int rank, pid_t pid) {
    const auto capture = save_native_stack(invocation.run.run_dir, rank, pid);
    observer.note(fmt::format("rank {} stopped answering: {}", rank, capture.note), true);
    stack_note = capture.note;
    if (capture.path) {
      const auto file = invocation.run.run_dir / *capture.path;
      std::error_code error;
      store::ArtifactRecord artifact{capture.path->string(), util::sha256_file(file).value_or(""),
                                     static_cast<std::int64_t>(std::filesystem::file_size(file, error))};
      recorder.post([id = invocation.run.id, artifact](store::Store& store) { store.add_artifact(id, artifact); });
    }
  };
  options.on_rank_exit = [&recorder, id = invocation.run.id](const launch::RankExit& exit) {
    recorder.post([id, exit](store::Store& store) {
      store.update_rank(id, exit.rank, rank_status(exit),
                        exit.exit_code >= 0 ? std::optional<int>(exit.exit_code) : std::nullopt,
                        exit.signal != 0 ? std::optional<int>(exit.signal) : std::nullopt);
    });
  };
  return options;
}

struct Supervised {
  Verdict verdict;
  RunFacts facts;
  json summary = json::object();     ///< program runs: what the program logged
  std::optional<std::string> death;  ///< a rank's death that a restart may cure (rank_death)
};

// A resume first stores what the invocations before it that never ended had received and not yet
// written (journal.hpp), through the same decoding as live records, then journals its own.
void replay_and_journal(const Invocation& invocation, RecordJournal& journal, RunObserver& observer,
                        launch::SupervisorOptions& options, ProgramRecords& program_records, const Recorder& recorder) {
  auto dispatch = options.on_record;
  if (invocation.resume) {
    for (const auto* earlier : journal.history().unfinished()) {
      for (const auto& [rank, record] : earlier->records) {
        dispatch(rank, record);
      }
      observer.note(fmt::format("invocation {} of run {} ended without storing its summary (its supervisor was "
                                "killed): its {} journaled record(s) are stored again, and its {:.1f} s count",
                                earlier->number, invocation.run.id, earlier->records.size(),
                                std::max(0.0, earlier->last_seen - earlier->started)),
                    true);
    }
    program_records.forget_times();
    journal.release_replayed();
  }
  options.on_record = [&journal, &recorder, dispatch](int rank, std::string_view record) {
    journal.append(rank, record);
    if (journal.wants_compaction() && recorder.keeping_up()) {
      journal.compact();  // what came more than seconds ago is in the store
    }
    dispatch(rank, record);
  };
}

// How a resume continues, or why a restart started, as the first line says it.
std::string how_started(const Invocation& invocation) {
  if (invocation.restart > 0) {
    return fmt::format("restarted ({})", invocation.cause);
  }
  if (!invocation.resume) {
    return "started";
  }
  if (invocation.program) {
    return fmt::format(
        "resumed: its program starts again with EXPCTL_RESUME=1 and continues from its own checkpoint in {}, if it "
        "wrote one",
        (invocation.run.run_dir / "checkpoints").string());
  }
  return invocation.resume_step ? fmt::format("resumed from its checkpoint at step {} (continuing with step {})",
                                              *invocation.resume_step, *invocation.resume_step + 1)
                                : std::string("resumed from scratch at step 1 (--from-scratch: it had no checkpoint)");
}

Supervised run_supervisor(store::Store& store, const Invocation& invocation, RecordJournal& journal,
                          std::optional<launch::HeldRanks> held) {
  RunObserver& observer = *invocation.observer;
  const launch::LaunchPlan& plan = invocation.plan;
  Recorder recorder(store, invocation.run.id, invocation.run.run_dir, observer, invocation.started,
                    static_cast<int>(plan.ranks.size()));
  export_tensorboard(recorder, store, invocation, plan.world_size);
  std::string stack_note;  // set when a rank stopped answering and its stack was (or was not) saved
  auto options = supervisor_options(invocation, observer, recorder, stack_note);
  const bool hands_over = invocation.handover && invocation.handover->index != 0;
  ProgramRecords program_records(&recorder, observer, /*keep=*/hands_over);
  if (invocation.program) {
    options.on_record = [&program_records](int rank, std::string_view line) { program_records.on_line(rank, line); };
  }
  replay_and_journal(invocation, journal, observer, options, program_records, recorder);
  observer.started({invocation.run.id, how_started(invocation), plan.ranks.size(), plan.world_size, options.log_dir});
  Supervised result;
  std::optional<launch::Outcome> outcome;
  try {
    launch::Supervisor supervisor(options);
    if (invocation.program) {
      const ProgramLaunch where{invocation.run.id, invocation.run.run_dir, invocation.run.run_dir / "checkpoints",
                                invocation.resume, invocation.store_host};
      supervisor.start(program_rank_specs(plan, invocation.resolved.spec, invocation.resolved.spec_file, where));
    } else if (held) {
      supervisor.start(std::move(*held), invocation.run.run_dir.string());
    } else {
      supervisor.start(launch::rank_specs(plan, worker_argv(invocation.run.run_dir.string(), invocation.resume)));
    }
    record_ranks(recorder, invocation, plan, supervisor.pids());
    outcome = supervisor.wait();
    result.verdict = verdict_of(*outcome, recorder.divergence(), recorder.last_steps());
    result.death = rank_death(*outcome, result.verdict, recorder.last_steps());
    if (!stack_note.empty() && outcome->root_cause &&
        outcome->root_cause->description.find("stopped answering") != std::string::npos) {
      auto& cause = result.verdict.root_cause;
      cause.insert(std::min(cause.find('\n'), cause.size()), "; " + stack_note);  // before the rank's last lines
    }
  } catch (const util::Failure& error) {
    result.verdict = {store::RunStatus::failed, util::ExitCode::run_failed, error.what()};
  }
  std::error_code ignored;
  std::filesystem::remove_all(invocation.run.run_dir / "tmp", ignored);  // the ranks' $TMPDIR, all ended
  if (invocation.program) {
    result.summary = end_program(invocation, program_records, recorder, outcome, result.verdict);
  }
  observer.finish();
  recorder.drain();
  result.facts = recorder.facts();
  return result;  // the recorder's thread ends here, before anyone else uses the store
}

}  // namespace

// `run_dir` "-": ranks started before the run is recorded read its folder from standard input.
// `-v`/`-vv` go on to the ranks, whose logs (logs/rank-N.log) then hold their own info or debug
// lines (the malloc settings, how LibTorch was loaded).
std::vector<std::string> worker_argv(const std::string& run_dir, bool resume) {
  std::vector<std::string> argv = {std::filesystem::read_symlink("/proc/self/exe").string()};
  if (util::log::level() <= util::log::Level::info) {
    argv.emplace_back(util::log::level() == util::log::Level::debug ? "-vv" : "-v");
  }
  argv.insert(argv.end(), {"worker", "--run-dir", run_dir});
  if (resume) {
    argv.emplace_back("--resume");
  }
  return argv;
}

// Plans this node's ranks once, after the rendezvous: the held ranks, the resume's checkpoint
// check and the supervisor all use this plan (make_launch_plan chooses a single node's free port).
void plan_node(Invocation& invocation) {
  auto request = invocation.resolved.node;
  if (invocation.rendezvous) {
    request.rendezvous_file = invocation.rendezvous->file.string();
  }
  invocation.plan = launch::make_launch_plan(request);
}

// distributed.timeout_s: the collective and rendezvous timeout.
std::chrono::seconds timeout_of(const json& spec) {
  return std::chrono::seconds(spec.at("distributed").at("timeout_s").get<std::int64_t>());
}

RunResult supervise(store::Store& store, Invocation& invocation, std::optional<launch::HeldRanks> held) {
  RunObserver& observer = *invocation.observer;
  if (invocation.resume && invocation.cause.empty()) {
    invocation.cause = "expctl resume: " + how_started(invocation);  // the summary's invocation_causes
  }
  while (true) {  // an attempt per start of the ranks: one, and one per restart (restarts.cpp)
    RecordJournal journal(invocation.run.run_dir, [&observer](const std::string& text) { observer.note(text, true); });
    auto supervised = run_supervisor(store, invocation, journal, std::move(held));
    held.reset();
    if (invocation.settle) {
      invocation.settle(supervised.verdict);
    }
    if (!restart_after(store, invocation, supervised.death, supervised.verdict, supervised.facts, supervised.summary,
                       journal)) {
      return conclude(store, invocation, supervised.verdict, supervised.facts, supervised.summary, &journal);
    }
  }
}

}  // namespace expctl::run::lifecycle
