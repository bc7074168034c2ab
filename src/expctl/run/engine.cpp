#include "expctl/run/engine.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/compare/selector.hpp"
#include "expctl/env/env_vars.hpp"
#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/run/console.hpp"
#include "expctl/run/forensics.hpp"
#include "expctl/run/journal.hpp"
#include "expctl/run/outcome.hpp"
#include "expctl/run/preflight.hpp"
#include "expctl/run/program.hpp"
#include "expctl/run/program_gather.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/run/rendezvous.hpp"
#include "expctl/run/resolved_run.hpp"
#include "expctl/run/resume_checks.hpp"
#include "expctl/run/signals.hpp"
#include "expctl/run/stack.hpp"
#include "expctl/run/summary.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/spec/canonical.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/tensorboard/export.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/temporary_folder.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// Time since this process started (not since main): loading LibTorch's shared libraries is part
// of what a user waits for before the first step, so it is counted.
SteadyClock::time_point process_start() {
  static const SteadyClock::time_point start =
      SteadyClock::now() - std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(util::seconds_since_process_start().value_or(0.0)));
  return start;
}

// When an invocation started: the first of this process at the process's start; any later one
// (`ab`, `nightly` and `sweep` run several in one process) when it began, so that each run's
// wall_time_s and time_to_first_step_s are its own, not the time since the command started.
SteadyClock::time_point invocation_start() {
  static std::atomic<bool> first{true};
  return first.exchange(false) ? process_start() : SteadyClock::now();
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

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
  bool quiet = false;
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
};

// ---------------------------------------------------------------------------------------------
// Live TensorBoard event files (spec metrics.tensorboard, `run --tensorboard DIR`).

std::filesystem::path tensorboard_dir(const json& spec) {
  const auto metrics = spec.find("metrics");
  if (metrics == spec.end() || !metrics->contains("tensorboard")) {
    return {};
  }
  return metrics->at("tensorboard").get<std::string>();
}

// The spec as the run records it: `run --tensorboard DIR` in place of the spec's metrics.tensorboard
// (a location, so the hash never held it), a relative one made absolute, so that a resume from
// another directory writes into the same folder.
json resolved_values(const spec::Spec& spec, const std::filesystem::path& tensorboard) {
  json values = spec.values();
  if (const auto dir = tensorboard.empty() ? tensorboard_dir(values) : tensorboard; !dir.empty()) {
    values["metrics"]["tensorboard"] = std::filesystem::absolute(dir).lexically_normal().string();
  }
  return values;
}

void export_tensorboard(Recorder& recorder, const store::Store& store, const Invocation& invocation,
                        int world_size) {
  const auto dir = tensorboard_dir(invocation.resolved.spec);
  if (dir.empty()) {
    return;
  }
  auto options = invocation.resume_step ? tensorboard::resumed_options(store, invocation.run.id,
                                                                       *invocation.resume_step, world_size)
                                        : tensorboard::LiveOptions{.world_size = world_size};
  recorder.export_tensorboard(std::make_unique<tensorboard::LiveExport>(dir, invocation.run, std::move(options)));
}

// ---------------------------------------------------------------------------------------------
// Recording a new run: one sequence for runs that expctl supervises and for rank 0 under an
// external launcher.

// What the store (and whoever reads it: show, serve, the team server) keeps of a spec: its
// canonical form with program.env's values masked as the fingerprint masks the environment
// (env::recorded_value). The hash stays that of the real values; the run folder's resolved.json,
// which a resume runs from, keeps them.
std::string stored_canonical(const spec::Spec& spec) {
  nlohmann::json document = nlohmann::json::parse(spec.canonical());
  const nlohmann::json::json_pointer env("/spec/program/env");
  if (!document.contains(env) || document[env].empty()) {
    return spec.canonical();
  }
  env::mask_variables(document[env]);
  return spec::canonical_json(document);
}

store::RunRecord record_new_run(store::Store& store, const spec::Spec& spec, const StackCheck& stack,
                                const std::vector<std::string>& tags, const ResolvedRun& resolved) {
  store.put_spec(spec.hash(), stored_canonical(spec), spec.get_string("name"));
  store.put_environment(stack.fingerprint_hash, stack.fingerprint.dump());
  auto run = store.create_run({spec.hash(), stack.fingerprint_hash, spec.get_string("name"), std::nullopt});
  for (const auto& tag : spec.get_string_list("tags")) {
    store.add_tag(run.id, tag);
  }
  for (const auto& tag : tags) {
    store.add_tag(run.id, tag);
  }
  // Drift accepted with --allow-drift stays visible in `list --tag` and in the summary.
  for (const auto& row : stack.drifted()) {
    store.add_tag(run.id, "drift:" + row.key);
  }
  if (resolved.node.nnodes > 1) {
    store.add_tag(run.id, fmt::format("node:{}", resolved.node.node_rank));
  }
  write_resolved_run(run.run_dir, resolved);
  return run;
}

// Ranks keep only their newest checkpoints: the artifacts of pruned ones are forgotten.
void forget_pruned_checkpoints(store::Store& store, const store::RunRecord& run) {
  for (const auto& artifact : store.artifacts(run.id)) {
    if (artifact.path.starts_with("checkpoints/") && !std::filesystem::exists(run.run_dir / artifact.path)) {
      store.remove_artifact(run.id, artifact.path);
    }
  }
}

void record_log_artifacts(store::Store& store, const store::RunRecord& run) {
  std::error_code error;
  // The trained model, where its kind has a file format PyTorch reads (train::Model::save_artifact).
  if (const auto model = run.run_dir / "model.pt"; std::filesystem::is_regular_file(model, error)) {
    if (const auto sha = util::sha256_file(model)) {
      store.add_artifact(run.id, {"model.pt", *sha, static_cast<std::int64_t>(std::filesystem::file_size(model, error))});
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(run.run_dir / "logs", error)) {
    if (entry.path().extension() != ".log") {
      continue;
    }
    if (const auto sha = util::sha256_file(entry.path())) {
      store.add_artifact(run.id, {entry.path().lexically_relative(run.run_dir).string(), *sha,
                                  static_cast<std::int64_t>(entry.file_size(error))});
    }
  }
}

// Image files passed over (data.on_bad_image skip): listed in the run folder, one per line, those
// of earlier invocations kept; their count is the summary's. Only image-folder runs have the key.
void record_skipped_images(const store::RunRecord& run, const RunFacts& facts, compare::RunSummary& summary) {
  const auto list = run.run_dir / "skipped-images.txt";
  std::set<std::string> files = facts.skipped_images;
  if (const auto earlier = util::read_file(list)) {  // absent before the first skip
    for (const auto& line : util::split(*earlier, '\n')) {
      if (!line.empty()) {
        files.insert(line);
      }
    }
  }
  if (files.empty()) {
    return;
  }
  std::string text;
  for (const auto& file : files) {
    text += file + "\n";
  }
  (void)util::write_file_atomic(list, text);
  summary.skipped_images = static_cast<std::int64_t>(files.size());
}

// ---------------------------------------------------------------------------------------------
// Concluding: artifacts, summary, then status and root cause, last: a store that cannot take
// all of it (the disk is still full) leaves the row `running` with no owner alive, so it reads as
// `lost` and `expctl resume` takes it, never as ended without its summary.

//
// `journal`: this invocation's (null under an external launcher); the invocations before it that
// never ended (their supervisor was killed, so they stored no summary) count as invocations, with
// the time from their start to their last record, and the journal ends once the summary is stored.
RunResult conclude(store::Store& store, const Invocation& invocation, const Verdict& verdict, const RunFacts& facts,
                   const json& extra_summary = json::object(), RecordJournal* journal = nullptr) {
  const auto& run = invocation.run;
  RunResult result;
  result.exit_code = verdict.exit_code;
  try {
    record_log_artifacts(store, run);
    forget_pruned_checkpoints(store, run);
    compare::RunSummary previous = invocation.resume
                                       ? compare::summary_from_json(json::parse(run.summary_json, nullptr, false))
                                       : compare::RunSummary{};
    if (journal != nullptr && invocation.resume) {
      const auto& history = journal->history();
      previous.invocations += static_cast<std::int64_t>(history.unfinished().size());
      previous.wall_time_s = previous.wall_time_s.value_or(0.0) + history.unfinished_seconds();
    }
    compare::RunSummary summary = compute_summary(store, run.id, previous, seconds_since(invocation.started),
                                                  invocation.resume ? std::nullopt : facts.time_to_first_step);
    const json& distributed = invocation.resolved.spec.at("distributed");
    // Which all-reduce ran: it fixes the summation order (a resume keeps the first one's name
    // when this invocation ended before its ranks reported).
    summary.allreduce = facts.allreduce ? json(*facts.allreduce) : previous.allreduce;
    summary.world_size =
        distributed.at("nnodes").get<std::int64_t>() * distributed.at("nproc_per_node").get<std::int64_t>();
    if (!invocation.drift.empty()) {
      summary.drift = env::verify_rows_json(invocation.drift);
    }
    record_skipped_images(run, facts, summary);
    if (!invocation.sandbox.empty()) {
      summary.others[util::summary_key::sandbox] = invocation.sandbox;
    }
    if (facts.eval_precision) {  // under train.amp: how the evaluation ran (docs/models.md)
      summary.others[util::summary_key::eval_precision] = *facts.eval_precision;
      summary.others[util::summary_key::eval_fallback] = facts.eval_fallback ? json(*facts.eval_fallback) : json();
    }
    result.summary = compare::to_json(summary);
    result.summary.update(extra_summary);
    store.set_summary(run.id, result.summary.dump());
    store.finish_run(run.id, verdict.status, util::to_int(verdict.exit_code), verdict.root_cause);
    if (journal != nullptr) {
      journal->end();
    }
    result.run = store.run(run.id);
  } catch (const util::Failure& error) {
    std::cerr << fmt::format("expctl: error: cannot record how run {} ended ({}): {}; it shows as lost and "
                             "`expctl resume {}` continues it once the store is writable\n",
                             run.id, verdict.root_cause.substr(0, verdict.root_cause.find('\n')), error.what(),
                             run.id);
    result.exit_code = util::ExitCode::run_failed;
    result.run = run;
    result.run->status = verdict.status;
    result.run->root_cause = verdict.root_cause;
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Supervising this node's ranks.

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

// Under an external launcher: the one rank this process is (launch::identity_plan), and the node's
// part as the run records it, taken from that plan.
void plan_external(Invocation& invocation, const launch::RankIdentity& identity) {
  invocation.plan = launch::identity_plan(identity);
  invocation.external = true;
  auto& node = invocation.resolved.node;
  node.nnodes = invocation.plan.nnodes;
  node.node_rank = invocation.plan.node_rank;
  node.nproc_per_node = invocation.plan.nproc_per_node;
  node.master_addr = invocation.plan.master_addr;
  node.master_port = invocation.plan.master_port;
}

// distributed.timeout_s: the collective and rendezvous timeout.
std::chrono::seconds timeout_of(const json& spec) {
  return std::chrono::seconds(spec.at("distributed").at("timeout_s").get<std::int64_t>());
}

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

launch::SupervisorOptions supervisor_options(const Invocation& invocation, Console& console, Recorder& recorder,
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
  options.console = [&console](std::string_view line) { console.line(line); };
  options.on_record = [&recorder](int rank, std::string_view payload) { recorder.on_record(rank, payload); };
  options.abort_check = [&recorder]() -> std::optional<std::string> {
    const auto fatal = recorder.fatal_error();
    return fatal ? std::optional<std::string>("cannot record the run's metrics: " + *fatal) : std::nullopt;
  };
  options.on_unresponsive = [&recorder, &console, &invocation, &stack_note](int rank, pid_t pid) {
    const auto capture = save_native_stack(invocation.run.run_dir, rank, pid);
    console.note(fmt::format("rank {} stopped answering: {}", rank, capture.note), true);
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
  json summary = json::object();  ///< program runs: what the program logged
};

// What a program run's summary says about its metrics (the built-in trainer always reports).
json program_summary(std::int64_t steps_logged, std::int64_t lines_skipped) {
  json program = {{"steps_logged", steps_logged}, {"lines_skipped", lines_skipped}};
  if (steps_logged == 0) {
    program["note"] = "the program logged no metrics (docs/program.md: expctl.log or the metrics protocol)";
  }
  return {{util::summary_key::program, program}};
}

// What this supervisor's program ranks did, to hand over to the one that records the run.
ProgramPart part_of(int index, const ProgramRecords& records, const std::optional<launch::Outcome>& outcome,
                    const Verdict& verdict) {
  ProgramPart part;
  part.index = index;
  part.points = records.points();
  part.steps_logged = records.steps_logged();
  part.lines_skipped = records.lines_skipped();
  part.root_cause = verdict.status == store::RunStatus::completed ? std::string() : verdict.root_cause;
  for (const auto& exit : outcome ? outcome->ranks : std::vector<launch::RankExit>{}) {
    part.ranks.push_back(
        {exit.rank, rank_status(exit), exit.exit_code >= 0 ? std::optional<int>(exit.exit_code) : std::nullopt,
         exit.signal != 0 ? std::optional<int>(exit.signal) : std::nullopt, util::host_name(), exit.pid});
  }
  return part;
}

// A supervisor other than the recording one: its part goes to the job's store. Its own records
// stay where they are (a node's own store), so a handover that fails costs a warning, not the run.
void hand_over(const Handover& handover, const ProgramPart& part, Console& console) {
  try {
    train::plugin::StoreClient client(handover.host, handover.port, handover.timeout);
    client.set(handover.prefix + part_key(handover.index), part_text(part));
  } catch (const util::Failure& error) {
    console.note(fmt::format("warning: cannot hand {} steps of this supervisor's ranks to the run of record: {}",
                             part.steps_logged, error.what()),
                 true);
  }
}

// The recording supervisor takes every other part (waiting up to `timeout` in all) and stores it
// as its ranks' own: the run of record then holds every rank's steps and how each rank ended. A
// rank of another part that failed fails a run whose own ranks completed; a part that never came
// is named in the summary.
json take_parts(const Handover& handover, const store::RunRecord& run, Recorder& recorder, Console& console,
                int world_size, Verdict& verdict, std::int64_t& steps, std::int64_t& skipped,
                std::chrono::seconds timeout) {
  const std::string& run_id = run.id;
  std::vector<std::string> missing;
  std::vector<ProgramPart> parts;
  if (handover.parts <= 1) {
    return json::object();
  }
  std::optional<train::plugin::StoreClient> client;
  try {
    client.emplace(handover.host, handover.port, timeout);
  } catch (const util::Failure&) {
  }
  const auto deadline = SteadyClock::now() + timeout;
  for (int index = 1; index < handover.parts; ++index) {
    const auto left = std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                  deadline - SteadyClock::now()));
    const auto text = client ? client->get(handover.prefix + part_key(index), left) : std::nullopt;
    if (text) {
      auto part = checked_part(*text, index, world_size);
      if (part) {
        parts.push_back(std::move(*part));
        continue;
      }
      console.note(fmt::format("warning: refused what {} {} handed over on the job's store: {}; its steps are not "
                               "recorded",
                               handover.noun, index, part.error()),
                   true);
    }
    missing.push_back(std::to_string(index));
  }
  for (const auto& part : parts) {
    steps += part.steps_logged;
    skipped += part.lines_skipped;
    if (!part.log.empty()) {  // an external launcher's rank: its log joins the run's
      (void)util::write_file_atomic(run.run_dir / "logs" / fmt::format("rank-{}.log", part.index), part.log);
    }
    for (std::size_t first = 0; first < part.points.size();) {
      std::size_t last = first;
      while (last < part.points.size() && part.points[last].rank == part.points[first].rank &&
             part.points[last].step == part.points[first].step) {
        ++last;
      }
      recorder.on_logged_step(part.points[first].rank, part.points[first].step,
                              {part.points.begin() + static_cast<std::ptrdiff_t>(first),
                               part.points.begin() + static_cast<std::ptrdiff_t>(last)});
      first = last;
    }
    recorder.post([ranks = part.ranks, run_id](store::Store& store) {
      std::map<int, bool> known;
      for (const auto& rank : store.ranks(run_id)) {
        known[rank.rank] = true;
      }
      for (const auto& rank : ranks) {
        if (!known.contains(rank.rank)) {
          store.add_rank(run_id, store::RankRecord{.rank = rank.rank, .host = rank.host, .pid = rank.pid});
        }
        store.update_rank(run_id, rank.rank, rank.status, rank.exit_code, rank.signal);
      }
    });
    if (!part.root_cause.empty() && verdict.status == store::RunStatus::completed) {
      verdict = {store::RunStatus::failed, util::ExitCode::run_failed, part.root_cause};
    }
  }
  json summary = json::object();
  if (!missing.empty()) {
    summary["parts_missing"] = fmt::format("{}(s) {} handed over no steps within {} s{}", handover.noun,
                                           util::join(missing, ", "), timeout.count(),
                                           handover.noun == "node" ? " (they are in those nodes' own stores)" : "");
  }
  return summary;
}

// A resume first stores what the invocations before it that never ended had received and not yet
// written (journal.hpp), through the same decoding as live records, then journals its own.
void replay_and_journal(const Invocation& invocation, RecordJournal& journal, Console& console,
                        launch::SupervisorOptions& options, ProgramRecords& program_records, const Recorder& recorder) {
  auto dispatch = options.on_record;
  if (invocation.resume) {
    for (const auto* earlier : journal.history().unfinished()) {
      for (const auto& [rank, record] : earlier->records) {
        dispatch(rank, record);
      }
      console.note(fmt::format("invocation {} of run {} ended without storing its summary (its supervisor was "
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

// A local module the program imported that no program.files pattern covers: its content is not in
// the spec hash, so an edit to it would train another experiment under the same hash. Named at the
// end; with --strict-inputs a run that completed fails (exit 2: the spec's input list is the fix).
void check_unhashed_modules(const std::vector<std::string>& unhashed, bool strict, Console& console, Verdict& verdict) {
  if (unhashed.empty()) {
    return;
  }
  const std::string what = fmt::format(
      "the program imported local module(s) that no program.files pattern covers, so their content is "
      "not in the spec hash: {}; add them to program.files (a glob such as \"lib/*.py\" covers a folder)",
      util::join(unhashed, ", "));
  if (strict && verdict.status == store::RunStatus::completed) {
    verdict = {store::RunStatus::failed, util::ExitCode::usage, what + " (--strict-inputs)"};
    return;
  }
  console.note("warning: " + what, true);
}

Supervised run_supervisor(store::Store& store, const Invocation& invocation, Console& console, RecordJournal& journal,
                          std::optional<launch::HeldRanks> held) {
  const launch::LaunchPlan& plan = invocation.plan;
  Recorder recorder(store, invocation.run.id, invocation.run.run_dir, console, invocation.started,
                    static_cast<int>(plan.ranks.size()));
  export_tensorboard(recorder, store, invocation, plan.world_size);
  std::string stack_note;  // set when a rank stopped answering and its stack was (or was not) saved
  auto options = supervisor_options(invocation, console, recorder, stack_note);
  const bool hands_over = invocation.handover && invocation.handover->index != 0;
  ProgramRecords program_records(&recorder, console, /*keep=*/hands_over);
  if (invocation.program) {
    options.on_record = [&program_records](int rank, std::string_view line) { program_records.on_line(rank, line); };
  }
  replay_and_journal(invocation, journal, console, options, program_records, recorder);
  if (!invocation.quiet) {
    const std::string verb =
        !invocation.resume   ? std::string("started")
        : invocation.program ? fmt::format(
                                   "resumed: its program starts again with EXPCTL_RESUME=1 and continues from its own "
                                   "checkpoint in {}, if it wrote one",
                                   (invocation.run.run_dir / "checkpoints").string())
        : invocation.resume_step ? fmt::format("resumed from its checkpoint at step {} (continuing with step {})",
                                               *invocation.resume_step, *invocation.resume_step + 1)
                                 : std::string("resumed from scratch at step 1 (--from-scratch: it had no checkpoint)");
    std::cerr << fmt::format("run {} {}: {} rank(s) on this node, world size {}, logs in {}\n", invocation.run.id,
                             verb, plan.ranks.size(), plan.world_size, options.log_dir.string());
  }
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
  std::int64_t steps = program_records.steps_logged();
  std::int64_t skipped = program_records.lines_skipped();
  json handover_summary = json::object();
  if (invocation.program && invocation.handover) {
    const auto& handover = *invocation.handover;
    if (hands_over) {
      hand_over(handover, part_of(handover.index, program_records, outcome, result.verdict), console);
    } else {
      // An interrupted job's other parts come within moments (their launcher stops them too).
      const auto timeout = result.verdict.status == store::RunStatus::interrupted ? std::chrono::seconds(10)
                                                                                  : handover.timeout;
      handover_summary = take_parts(handover, invocation.run, recorder, console, plan.world_size, result.verdict, steps,
                                    skipped, timeout);
    }
  }
  const auto unhashed = invocation.program ? unhashed_modules(program_records.modules(), invocation.resolved.spec,
                                                              invocation.resolved.spec_file)
                                           : std::vector<std::string>{};
  check_unhashed_modules(unhashed, invocation.strict_inputs, console, result.verdict);
  console.finish();
  recorder.drain();
  result.facts = recorder.facts();
  if (invocation.program) {
    result.summary = program_summary(steps, skipped);
    if (!unhashed.empty()) {
      result.summary[util::summary_key::program]["unhashed_modules"] = unhashed;
    }
    result.summary[util::summary_key::program].update(handover_summary);
    if (invocation.external) {
      result.summary[util::summary_key::world_size] = plan.world_size;  // the launcher's, whatever the spec says
    }
  }
  return result;  // the recorder's thread ends here, before anyone else uses the store
}

RunResult supervise(store::Store& store, const Invocation& invocation,
                    std::optional<launch::HeldRanks> held = std::nullopt) {
  Console console(invocation.quiet);
  RecordJournal journal(invocation.run.run_dir, [&console](const std::string& text) { console.note(text, true); });
  const auto supervised = run_supervisor(store, invocation, console, journal, std::move(held));
  return conclude(store, invocation, supervised.verdict, supervised.facts, supervised.summary, &journal);
}

// ---------------------------------------------------------------------------------------------
// Under an external launcher: this process is one rank; global rank 0 records the run.

train::TrainerConfig external_config(const spec::Spec& spec, const launch::RankIdentity& identity) {
  auto config = train_options(spec.values(), identity, spec.input_paths());
  config.report_steps_from_rank = 1;  // only rank 0 records: it reports every other rank's steps
  return config;
}

void print_line(const std::string& line) { std::cerr << line << std::endl; }

// A rank other than 0 records nothing (rank 0 reports its steps at the end); its first step ends
// the time in which a stop signal simply exits.
class UnrecordedRank final : public train::MetricSink {
 public:
  void on_step(const train::StepMetrics& /*metrics*/) override { mark_training_started(); }
  void on_eval(const train::EvalMetrics& /*metrics*/) override {}
  void on_checkpoint(const train::CheckpointFile& /*file*/) override {}
};

// Rank 0 trains in the recording process: its records reach the recorder as the typed values they
// are, and after each one a store that can no longer be written ends training.
class RankZeroSink final : public train::MetricSink {
 public:
  explicit RankZeroSink(Recorder& recorder) : m_recorder(recorder) {}
  void on_start(const train::TrainingStart& start) override {
    m_recorder.on_start(start);
    m_recorder.throw_if_fatal();
  }
  void on_step(const train::StepMetrics& metrics) override {
    mark_training_started();
    m_recorder.on_step(0, metrics);
    m_recorder.throw_if_fatal();
  }
  void on_eval(const train::EvalMetrics& metrics) override {
    m_recorder.on_eval(metrics);
    m_recorder.throw_if_fatal();
  }
  void on_checkpoint(const train::CheckpointFile& file) override {
    m_recorder.on_checkpoint(file);
    m_recorder.throw_if_fatal();
  }
  void on_remote_steps(int rank, const std::vector<train::StepMetrics>& steps) override {
    m_recorder.on_remote_steps(rank, steps);
    m_recorder.throw_if_fatal();
  }
  void on_collectives(const std::string& allreduce) override {
    m_recorder.on_collectives(allreduce);
    m_recorder.throw_if_fatal();
  }
  void on_skipped_images(const std::vector<std::string>& files) override {
    m_recorder.on_skipped_images(files);
    m_recorder.throw_if_fatal();
  }
  void on_end(const train::TrainingEnd& /*end*/) override { m_recorder.throw_if_fatal(); }

 private:
  Recorder& m_recorder;
};

RunResult external_other_rank(const train::TrainerConfig& config) {
  RunResult result;
  try {
    UnrecordedRank sink;
    const auto trained = train::plugin::run_worker(config, sink, print_line, &stop_requested());
    result.exit_code = trained.interrupted ? util::ExitCode::interrupted : util::ExitCode::ok;
  } catch (const train::DivergedError& error) {
    std::cerr << "expctl: error: " << error.what() << std::endl;
    result.exit_code = util::ExitCode::run_failed;
  }
  return result;
}

Verdict train_as_rank_zero(const train::TrainerConfig& config, Recorder& recorder) {
  try {
    RankZeroSink sink(recorder);
    const auto trained = train::plugin::run_worker(config, sink, print_line, &stop_requested());
    if (trained.interrupted) {
      return {store::RunStatus::interrupted, util::ExitCode::interrupted, "interrupted by a signal"};
    }
    return {};
  } catch (const train::DivergedError& error) {
    const auto divergence = recorder.divergence();
    return {store::RunStatus::diverged, util::ExitCode::run_failed,
            (divergence ? divergence_text(*divergence) : std::string(error.what())) +
                ": lower optim.lr, set train.grad_clip_norm, or set train.nonfinite=skip to skip such steps"};
  } catch (const util::Failure& error) {
    return {store::RunStatus::failed, util::ExitCode::run_failed, fmt::format("rank 0: {}", error.what())};
  }
}

RunResult run_as_external_rank(SteadyClock::time_point started, const RunRequest& request, const spec::Spec& spec,
                               const StackCheck& stack, const launch::RankIdentity& identity) {
  util::log::debug(util::tune_malloc_for_training());  // before anything allocates (docs/run.md)
  train::plugin::preload();  // this process trains: LibTorch starts up while the run is recorded
  install_stop_handlers();
  auto config = external_config(spec, identity);
  if (identity.rank != 0) {
    return external_other_rank(config);  // only global rank 0 records; the others train and log
  }
  store::Store store = request.open_store();
  Invocation invocation;
  invocation.started = started;
  invocation.resolved.spec = resolved_values(spec, request.tensorboard);
  invocation.resolved.inputs = spec.input_paths();
  invocation.resolved.spec_file = std::filesystem::absolute(spec.file()).string();
  plan_external(invocation, identity);
  invocation.drift = stack.drifted();
  invocation.quiet = request.quiet;
  auto tags = request.tags;
  tags.push_back("launcher:" + identity.launcher);
  invocation.run = record_new_run(store, spec, stack, tags, invocation.resolved);
  store.add_rank(invocation.run.id, store::RankRecord{.rank = 0, .host = util::host_name(), .pid = ::getpid()});
  config.checkpoint_dir = invocation.run.run_dir / "checkpoints";
  Console console(request.quiet);
  Verdict verdict;
  RunFacts facts;
  {
    Recorder recorder(store, invocation.run.id, invocation.run.run_dir, console, invocation.started);
    export_tensorboard(recorder, store, invocation, invocation.plan.world_size);
    verdict = train_as_rank_zero(config, recorder);
    console.finish();
    recorder.drain();
    facts = recorder.facts();
  }
  store.update_rank(invocation.run.id, 0, verdict.status, util::to_int(verdict.exit_code), std::nullopt);
  return conclude(store, invocation, verdict, facts);
}

// ---------------------------------------------------------------------------------------------
// A program's ranks when more than one `expctl` supervises them (program_gather.hpp).

// Several nodes started with --nnodes: node 0 hosts the store the program's ranks join (as for
// built-in runs, so no rank races another to bind it), and every node hands its ranks' steps to
// node 0 at the end. One node: the program's rank 0 hosts it, nothing is handed over.
void prepare_program_nodes(Invocation& invocation) {
  auto& node = invocation.resolved.node;
  if (node.nnodes <= 1) {
    return;
  }
  train::plugin::preload();  // the store's client and server live in the training plugin
  invocation.rendezvous = host_rendezvous(node, timeout_of(invocation.resolved.spec));
  invocation.store_host = StoreHost::expctl;
  invocation.handover = Handover{node.master_addr, static_cast<std::uint16_t>(node.master_port), node.node_rank,
                                 node.nnodes, "node", "", timeout_of(invocation.resolved.spec)};
}

// Under an external launcher every rank's `expctl run` starts the program as that rank. The store
// the program's ranks meet in is torchrun's agent's when it hosts one (TORCHELASTIC_USE_AGENT_STORE),
// else global rank 0's `expctl run` hosts it on MASTER_PORT, as torchrun's agent would. Rank 0
// publishes the run's id there once it is recorded, and the others hand their steps over at the end.
Invocation external_program_invocation(SteadyClock::time_point started, const RunRequest& request,
                                       const spec::Spec& spec, const launch::RankIdentity& identity) {
  Invocation invocation;
  invocation.started = started;
  invocation.program = true;
  invocation.quiet = request.quiet;
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
    std::cerr << fmt::format("expctl: error: rank {}: rank 0 did not publish its run at {}:{} within {} s: check "
                             "that global rank 0 runs `expctl run` with the same spec and store (its own output "
                             "says why it stopped); no program was started on this rank\n",
                             rank, handover.host, handover.port, handover.timeout.count());
    result.exit_code = util::ExitCode::run_failed;
    return result;
  }
  const std::filesystem::path scratch = util::make_temporary_folder(fmt::format("expctl-rank{}-", rank));
  invocation.run.id = published->at("run_id").get<std::string>();
  Console console(invocation.quiet);
  ProgramRecords records(nullptr, console, /*keep=*/true);
  launch::SupervisorOptions options;
  options.log_dir = scratch / "logs";
  options.grace_period = std::chrono::seconds(3);
  options.heartbeat_timeout = handover.timeout;
  options.silence_counts_after_first_line = true;
  options.console = [&console](std::string_view line) { console.line(line); };
  options.on_record = [&records](int from, std::string_view line) { records.on_line(from, line); };
  options.on_unresponsive = [&console](int from, pid_t) { console.note(fmt::format("rank {} stopped answering", from), true); };
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
  hand_over(handover, part, console);
  console.finish();
  std::error_code ignored;
  std::filesystem::remove_all(scratch, ignored);
  if (verdict.status != store::RunStatus::completed) {
    std::cerr << fmt::format("expctl: rank {} of run {} {}: {}\n", rank, invocation.run.id,
                             store::to_string(verdict.status), verdict.root_cause);
  }
  result.exit_code = verdict.exit_code;
  return result;
}

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
  tags.push_back("launcher:" + identity.launcher);
  invocation.run = record_new_run(store, spec, stack, tags, invocation.resolved);
  const auto& handover = *invocation.handover;
  try {
    train::plugin::StoreClient client(handover.host, handover.port, handover.timeout);
    client.set(handover.prefix + k_program_run_key, json{{"run_id", invocation.run.id},
                                       {"checkpoint_dir", (invocation.run.run_dir / "checkpoints").string()}}
                                      .dump());
  } catch (const util::Failure& error) {
    const Verdict verdict{store::RunStatus::failed, util::ExitCode::run_failed,
                          fmt::format("rank 0 cannot publish the run to the other ranks: {}", error.what())};
    return conclude(store, invocation, verdict, RunFacts{});
  }
  return supervise(store, invocation);
}

// ---------------------------------------------------------------------------------------------

// --nnodes changes the world size, so it enters the spec (and its hash) like a --set would.
spec::LoadOptions load_options(const RunRequest& request) {
  return {request.overrides, request.nnodes > 0 ? std::optional<std::int64_t>(request.nnodes) : std::nullopt};
}

RunResult refused_for_pins(const StackCheck& stack, const RunRequest& request) {
  RunResult result;
  result.exit_code = util::ExitCode::mismatch;
  result.pin_rows = stack.rows;
  result.refusal = fmt::format(
      "{}: this machine does not match the pinned stack ({} of {} pins differ): fix the environment, or pass "
      "--allow-drift to run anyway and record the drift on the run",
      request.spec_file.string(), stack.drifted().size(), stack.rows.size());
  return result;
}

launch::LaunchRequest node_of(const RunRequest& request, const spec::Spec& spec) {
  launch::LaunchRequest node;
  node.nnodes = static_cast<int>(spec.get_int("distributed.nnodes"));
  node.nproc_per_node = static_cast<int>(spec.get_int("distributed.nproc_per_node"));
  node.node_rank = request.node_rank;
  node.master_addr = request.master_addr;
  node.master_port =
      request.master_port >= 0 ? request.master_port : static_cast<int>(spec.get_int("distributed.master_port"));
  return node;
}

// Refuses before anything changes when this node's ranks hold checkpoints but no step is intact
// on all of them (the ranks then pick that step collectively, across nodes too).
void check_checkpoints(Invocation& invocation, bool from_scratch) {
  std::vector<int> ranks;
  for (const auto& rank : invocation.plan.ranks) {
    ranks.push_back(rank.rank);
  }
  const auto point = train::resume_point(invocation.run.run_dir / "checkpoints", ranks, invocation.run.id);
  if (!point.refusal.empty()) {
    throw util::UsageError(fmt::format("run {} cannot be resumed: {}; no checkpoint step is intact on every rank, "
                                       "so start a new run",
                                       invocation.run.id, point.refusal));
  }
  if (!point.step && !from_scratch) {
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: it has no checkpoint (it was killed before its first; train.checkpoint_every_s "
        "and train.checkpoint_every write them); `expctl resume {} --from-scratch` starts it again from step 0 "
        "under the same id",
        invocation.run.id, invocation.run.id));
  }
  if (!point.note.empty() && !invocation.quiet) {
    std::cerr << fmt::format("note: run {}: {}\n", invocation.run.id, point.note);
  }
  invocation.resume_step = point.step;
}

}  // namespace

RunResult run_spec(const RunRequest& request) {
  const SteadyClock::time_point started = invocation_start();
  // Validation first: a bad spec exits 2 before anything is recorded.
  const spec::Spec spec = spec::load_spec(request.spec_file, load_options(request));
  const auto identity = launch::detect_launcher(launch::current_environment());
  const std::string sandbox = check_sandbox(spec.values(), "the run", identity.has_value());
  preflight_training(spec);  // a model file or arrays: an input error exits 2 before anything starts
  Invocation invocation;
  invocation.started = started;
  invocation.strict_inputs = request.strict_inputs;
  invocation.sandbox = sandbox;
  invocation.program = spec::has_program(spec.values());
  if (invocation.program) {
    check_program_launchable(spec.values(), request.spec_file);  // exit 2 before any rank starts
  }
  std::optional<launch::HeldRanks> held;
  if (!identity && invocation.program) {
    invocation.resolved.spec = resolved_values(spec, request.tensorboard);
    invocation.resolved.spec_file = std::filesystem::absolute(request.spec_file).string();
    invocation.resolved.node = node_of(request, spec);
    prepare_program_nodes(invocation);  // several nodes: node 0 hosts the store (a port in use: exit 2)
    plan_node(invocation);
  } else if (!identity) {
    invocation.resolved.spec = resolved_values(spec, request.tensorboard);
    invocation.resolved.inputs = spec.input_paths();
    // Absolute: `resume` may run from another directory and fingerprints the spec's folder again.
    invocation.resolved.spec_file = std::filesystem::absolute(request.spec_file).string();
    invocation.resolved.node = node_of(request, spec);
    // The rendezvous is prepared before anything is recorded: a port in use leaves no trace.
    invocation.rendezvous = host_rendezvous(invocation.resolved.node, timeout_of(invocation.resolved.spec));
    plan_node(invocation);
    // The ranks start now and load LibTorch while the stack is fingerprinted and the run
    // recorded; they learn the run's folder once it exists. A refusal below kills them.
    held.emplace(launch::rank_specs(invocation.plan, worker_argv("-", false)));
  }
  // The supervisor itself needs LibTorch only for its build facts (the fingerprint), which are
  // cached after the first run: then it never loads it.
  if (!train::plugin::torch_build_fields_cached()) {
    train::plugin::preload();  // LibTorch starts up while the stack is fingerprinted
  }
  const StackCheck stack = check_pinned_stack(spec);
  if (!stack.drifted().empty() && !request.allow_drift) {
    return refused_for_pins(stack, request);
  }
  if (identity) {
    return invocation.program ? run_program_as_external_rank(invocation.started, request, spec, stack, *identity)
                              : run_as_external_rank(invocation.started, request, spec, stack, *identity);
  }
  invocation.drift = stack.drifted();
  invocation.quiet = request.quiet;
  store::Store store = request.open_store();
  invocation.run = record_new_run(store, spec, stack, request.tags, invocation.resolved);
  return supervise(store, invocation, std::move(held));
}

RunResult resume_run(const ResumeRequest& request) {
  store::Store store = request.open_store();
  Invocation invocation;
  invocation.started = invocation_start();
  invocation.run = find_resumable_run(store, request.selector, request.open_team_store);
  invocation.resolved = read_resolved_run(invocation.run.run_dir);
  // What would train must be what the run started as, by the hash the store holds for it. The
  // inputs' digests are remembered (util::file_digest), so this costs a stat per file; LibTorch
  // starts loading only after it, so a refused resume never loads it. (Refusals after the preload
  // exit only once the load has ended: cli::run waits for it, train::plugin::settle.)
  check_resumed_inputs(store, invocation.run, invocation.resolved);
  invocation.sandbox = check_sandbox(invocation.resolved.spec, "the run");
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
  invocation.quiet = request.quiet;
  invocation.program = spec::has_program(invocation.resolved.spec);
  if (invocation.program) {
    for (const auto& tag : invocation.run.tags) {
      if (tag.starts_with("launcher:")) {
        throw util::UsageError(fmt::format(
            "run {} was started by {}, one `expctl run` per rank: it cannot be resumed by one process; start a new "
            "run under the launcher (the program may read its checkpoints from {})",
            invocation.run.id, tag.substr(9), (invocation.run.run_dir / "checkpoints").string()));
      }
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

}  // namespace expctl::run
