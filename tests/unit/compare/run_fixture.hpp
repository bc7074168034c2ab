#pragma once
/// Writes runs with known per-step distributions through the store API, the way the runner
/// records them (per-rank series "samples_per_sec", "step_time_ms", "loss"; a summary with the
/// runner's field names), so compare is tested without launching anything. Header-only: the
/// CLI tests include it too.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::compare::testing {

/// A small valid spec value tree (the fields compare reads, plus a few to diff).
inline nlohmann::json fixture_spec(const std::string& name = "tiny") {
  return {{"name", name},
          {"seed", 1},
          {"data", {{"dataset", "synthetic"}, {"batch_size", 64}}},
          {"optim", {{"name", "sgd"}, {"lr", 0.05}}}};
}

/// A fingerprint with fixed values (never probed, so reports are deterministic).
inline nlohmann::json fixture_fingerprint(const std::string& kernel = "6.1.0-18-amd64", int omp_threads = 2) {
  env::Fingerprint fingerprint;
  fingerprint.set("host.os_id", "debian");
  fingerprint.set("host.kernel", kernel);
  fingerprint.set("host.arch", "x86_64");
  fingerprint.set("host.cpu_logical_cores", omp_threads * 2);
  return fingerprint.to_json();
}

/// One run to write: per-step series for one rank, with no warm-up steps excluded.
struct FakeRun {
  nlohmann::json spec = fixture_spec();
  nlohmann::json env_profile = nullptr;
  std::optional<nlohmann::json> fingerprint;
  std::vector<double> throughput;    ///< samples_per_sec per step
  std::vector<double> step_time_ms;  ///< per step
  std::vector<double> loss;          ///< per step (rank 0)
  std::optional<double> eval_accuracy;
  std::vector<std::string> tags;
  store::RunStatus status = store::RunStatus::completed;
  /// The canonical spec text to store instead of one built from `spec` (a real Spec::canonical(),
  /// so that the run belongs to that spec's hash).
  std::string canonical;
  /// Seconds after 2026-11-29T00:00:00Z (fixed, so ids and times in golden files never change).
  int start_offset_s = 0;
};

/// The runner's loss_curve_sha256 (one implementation, in compare).
inline std::string fixture_curve_sha256(const std::vector<double>& losses) {
  return compare::loss_curve_sha256(losses);
}

inline double fixture_median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/// Writes `run` (spec, environment, run, metrics, summary, tags, status) and returns its record.
inline store::RunRecord write_run(store::Store& db, const FakeRun& run) {
  const nlohmann::json canonical = {{"expctl_spec_version", 1}, {"env_profile", run.env_profile}, {"spec", run.spec}};
  const std::string text = run.canonical.empty() ? canonical.dump() : run.canonical;
  const std::string hash = util::sha256_hex(text);
  db.put_spec(hash, text, run.spec.value("name", "tiny"));
  std::optional<std::string> environment_hash;
  if (run.fingerprint) {
    environment_hash = run.fingerprint->at("hash").get<std::string>();
    db.put_environment(*environment_hash, run.fingerprint->dump());
  }
  const auto epoch = store::parse_utc("2026-11-29T00:00:00.000Z").value();
  const auto record = db.create_run(
      {hash, environment_hash, run.spec.value("name", "tiny"), epoch + std::chrono::seconds(run.start_offset_s)});
  std::vector<store::MetricPoint> points;
  for (size_t i = 0; i < run.throughput.size(); ++i) {
    points.push_back({0, static_cast<std::int64_t>(i + 1), "samples_per_sec", run.throughput[i]});
  }
  for (size_t i = 0; i < run.step_time_ms.size(); ++i) {
    points.push_back({0, static_cast<std::int64_t>(i + 1), "step_time_ms", run.step_time_ms[i]});
  }
  for (size_t i = 0; i < run.loss.size(); ++i) {
    points.push_back({0, static_cast<std::int64_t>(i + 1), "loss", run.loss[i]});
  }
  db.append_metrics(record.id, points);
  nlohmann::json summary = {{"warmup_steps", 0}, {"steps", run.loss.size()}};
  if (!run.throughput.empty()) {
    summary["samples_per_sec"] = fixture_median(run.throughput);
  }
  if (!run.step_time_ms.empty()) {
    summary["step_time_ms_p50"] = fixture_median(run.step_time_ms);
    summary["step_time_ms_p95"] = compare::percentile(run.step_time_ms, 95);
  }
  if (!run.loss.empty()) {
    summary["final_train_loss"] = run.loss.back();
    summary["loss_curve_sha256"] = fixture_curve_sha256(run.loss);
  }
  if (run.eval_accuracy) {
    summary["eval_accuracy"] = *run.eval_accuracy;
  }
  db.set_summary(record.id, summary.dump());
  for (const auto& tag : run.tags) {
    db.add_tag(record.id, tag);
  }
  if (run.status != store::RunStatus::running) {
    db.finish_run(record.id, run.status, run.status == store::RunStatus::completed ? 0 : 1, "");
  }
  return *db.run(record.id);
}

/// A decreasing loss curve of `steps` values.
inline std::vector<double> fixture_loss(size_t steps, double start = 2.3) {
  std::vector<double> loss(steps);
  for (size_t i = 0; i < steps; ++i) {
    loss[i] = start / (1.0 + 0.1 * static_cast<double>(i));
  }
  return loss;
}

}  // namespace expctl::compare::testing
