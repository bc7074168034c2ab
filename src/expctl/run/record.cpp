// Recording a run and concluding it: one sequence for runs that expctl supervises and for rank 0
// under an external launcher, and the one place where every lifecycle ends (conclude).

#include <atomic>
#include <set>

#include <fmt/format.h>

#include "expctl/compare/run_summary.hpp"
#include "expctl/env/env_vars.hpp"
#include "expctl/run/lifecycle.hpp"
#include "expctl/run/summary.hpp"
#include "expctl/spec/canonical.hpp"
#include "expctl/tensorboard/export.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::run::lifecycle {
namespace {

using nlohmann::json;

// Time since this process started (not since main): loading LibTorch's shared libraries is part
// of what a user waits for before the first step, so it is counted.
SteadyClock::time_point process_start() {
  static const SteadyClock::time_point start =
      SteadyClock::now() - std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(util::seconds_since_process_start().value_or(0.0)));
  return start;
}

// Live TensorBoard event files (spec metrics.tensorboard, `run --tensorboard DIR`).
std::filesystem::path tensorboard_dir(const json& spec) {
  const auto metrics = spec.find("metrics");
  if (metrics == spec.end() || !metrics->contains("tensorboard")) {
    return {};
  }
  return metrics->at("tensorboard").get<std::string>();
}

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
      store.add_artifact(run.id,
                         {"model.pt", *sha, static_cast<std::int64_t>(std::filesystem::file_size(model, error))});
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

}  // namespace

SteadyClock::time_point invocation_start() {
  static std::atomic<bool> first{true};
  return first.exchange(false) ? process_start() : SteadyClock::now();
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

RunObserver& observer_or_silent(RunObserver* given) {
  static SilentObserver silent;  // stateless
  return given != nullptr ? *given : silent;
}

RankStop& stop_or_none(RankStop* given) {
  static StopFlag none;  // nobody signals it
  return given != nullptr ? *given : none;
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

void export_tensorboard(Recorder& recorder, const store::Store& store, const Invocation& invocation, int world_size) {
  const auto dir = tensorboard_dir(invocation.resolved.spec);
  if (dir.empty()) {
    return;
  }
  auto options = invocation.resume_step
                     ? tensorboard::resumed_options(store, invocation.run.id, *invocation.resume_step, world_size)
                     : tensorboard::LiveOptions{.world_size = world_size};
  recorder.export_tensorboard(std::make_unique<tensorboard::LiveExport>(dir, invocation.run, std::move(options)));
}

void add_drift_tags(store::Store& store, const std::string& run_id, const std::vector<env::VerifyRow>& drifted) {
  for (const auto& row : drifted) {
    store.add_tag(run_id, "drift:" + row.key);
  }
}

// ---------------------------------------------------------------------------------------------
// Recording a new run: one sequence for runs that expctl supervises and for rank 0 under an
// external launcher.

store::RunRecord record_new_run(store::Store& store, const spec::Spec& spec, const StackCheck* stack,
                                const std::vector<std::string>& tags, const ResolvedRun& resolved) {
  store.put_spec(spec.hash(), stored_canonical(spec), spec.get_string("name"));
  std::optional<std::string> environment;
  if (stack != nullptr) {
    store.put_environment(stack->fingerprint_hash, stack->fingerprint.dump());
    environment = stack->fingerprint_hash;
  }
  auto run = store.create_run(
      {.spec_hash = spec.hash(), .environment_hash = environment, .name = spec.get_string("name"), .queued = !stack});
  for (const auto& tag : spec.get_string_list("tags")) {
    store.add_tag(run.id, tag);
  }
  for (const auto& tag : tags) {
    store.add_tag(run.id, tag);
  }
  // Drift accepted with --allow-drift stays visible in `list --tag` and in the summary.
  if (stack != nullptr) {
    add_drift_tags(store, run.id, stack->drifted());
  }
  if (resolved.node.nnodes > 1) {
    store.add_tag(run.id, fmt::format("node:{}", resolved.node.node_rank));
  }
  write_resolved_run(run.run_dir, resolved);
  return run;
}

// ---------------------------------------------------------------------------------------------
// Concluding: artifacts, summary, then status and root cause, last: a store that cannot take
// all of it (the disk is still full) leaves the row `running` with no owner alive, so it reads as
// `lost` and `expctl resume` takes it, never as ended without its summary.
//
// `journal`: this invocation's (null under an external launcher); the invocations before it that
// never ended (their supervisor was killed, so they stored no summary) count as invocations, with
// the time from their start to their last record, and the journal ends once the summary is stored.
json store_summary(store::Store& store, const Invocation& invocation, const RunFacts& facts, const json& extra_summary,
                   RecordJournal* journal) {
  const auto& run = invocation.run;
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
  // Why each invocation after the first started (a resume, a restart), by its number; earlier
  // ones' causes are kept.
  json causes = previous.others.value(util::summary_key::invocation_causes, json::object());
  if (!causes.is_object()) {
    causes = json::object();
  }
  if (!invocation.cause.empty()) {
    causes[std::to_string(summary.invocations)] = invocation.cause;
  }
  if (!causes.empty()) {
    summary.others[util::summary_key::invocation_causes] = causes;
  }
  json stored = compare::to_json(summary);
  stored.update(extra_summary);
  stored.update(invocation.summary_extra);
  store.set_summary(run.id, stored.dump());
  return stored;
}

RunResult conclude(store::Store& store, const Invocation& invocation, const Verdict& verdict, const RunFacts& facts,
                   const json& extra_summary, RecordJournal* journal) {
  const auto& run = invocation.run;
  RunResult result;
  result.exit_code = verdict.exit_code;
  try {
    result.summary = store_summary(store, invocation, facts, extra_summary, journal);
    if (verdict.status == store::RunStatus::queued) {
      store.queue_run(run.id, verdict.root_cause);  // its job starts again and resumes it
    } else {
      store.finish_run(run.id, verdict.status, util::to_int(verdict.exit_code), verdict.root_cause);
    }
    if (journal != nullptr) {
      journal->end();
    }
    result.run = store.run(run.id);
  } catch (const util::Failure& error) {
    invocation.observer->error(
        fmt::format("cannot record how run {} ended ({}): {}; it shows as lost and "
                    "`expctl resume {}` continues it once the store is writable",
                    run.id, verdict.root_cause.substr(0, verdict.root_cause.find('\n')), error.what(), run.id));
    result.exit_code = util::ExitCode::run_failed;
    result.run = run;
    result.run->status = verdict.status;
    result.run->root_cause = verdict.root_cause;
  }
  return result;
}

}  // namespace expctl::run::lifecycle
