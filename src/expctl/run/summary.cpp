#include "expctl/run/summary.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/compare/statistics.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

json or_null(const std::vector<double>& values, double (*statistic)(std::span<const double>)) {
  return values.empty() ? json(nullptr) : json(statistic(values));
}

double p50(std::span<const double> values) { return compare::percentile(values, 50.0); }
double p95(std::span<const double> values) { return compare::percentile(values, 95.0); }

std::vector<store::MetricPoint> series(const store::Store& store, const std::string& run_id, const char* name,
                                       std::optional<int> rank = std::nullopt) {
  return store.metrics(run_id, {.name = std::string(name), .rank = rank});
}

// Σ comm_wait_ms / Σ step_time_ms over every rank's steps after warm-up; null when no rank timed
// its communication wait (a program's run): not measured is not 0.
json wait_fraction(const std::vector<store::MetricPoint>& waits, const std::vector<store::MetricPoint>& times,
                   std::int64_t warmup) {
  const auto total = [warmup](const std::vector<store::MetricPoint>& points) {
    double sum = 0.0;
    for (const auto& point : points) {
      sum += point.step > warmup && std::isfinite(point.value) ? point.value : 0.0;
    }
    return sum;
  };
  const double time_total = total(times);
  return time_total > 0.0 && !waits.empty() ? json(total(waits) / time_total) : json(nullptr);
}

std::size_t ranks_of(const std::vector<store::MetricPoint>& points) {
  std::map<int, bool> ranks;
  for (const auto& point : points) {
    ranks[point.rank] = true;
  }
  return ranks.size();
}

json last_value(const std::vector<store::MetricPoint>& points) {
  return points.empty() ? json(nullptr) : json(points.back().value);
}

}  // namespace

json compute_summary(const store::Store& store, const std::string& run_id, const json& previous,
                     double invocation_wall_s, std::optional<double> time_to_first_step_s) {
  std::vector<double> losses;
  for (const auto& point : series(store, run_id, "loss", 0)) {
    losses.push_back(point.value);
  }
  const auto steps = static_cast<std::int64_t>(losses.size());
  const auto warmup = compare::default_warmup_steps(steps);
  const auto times = series(store, run_id, compare::k_step_time_series);
  const auto slowest = compare::step_samples(times, warmup, /*sum=*/false);
  const auto rate = compare::step_samples(series(store, run_id, compare::k_throughput_series), warmup, /*sum=*/true);
  double skipped = 0.0;
  for (const auto& point : series(store, run_id, "skipped", 0)) {
    skipped += point.value;
  }
  json summary = json::object();
  summary["final_train_loss"] = losses.empty() ? json(nullptr) : json(losses.back());
  summary["eval_loss"] = last_value(series(store, run_id, "eval_loss", 0));
  summary["eval_accuracy"] = last_value(series(store, run_id, "eval_accuracy", 0));
  summary["samples_per_sec"] = or_null(rate, compare::median);
  summary["step_time_ms_p50"] = or_null(slowest, p50);
  summary["step_time_ms_p95"] = or_null(slowest, p95);
  summary["comm_wait_fraction"] = wait_fraction(series(store, run_id, compare::k_comm_wait_series), times, warmup);
  summary["loss_curve_sha256"] = losses.empty() ? json(nullptr) : json(compare::loss_curve_sha256(losses));
  summary["steps"] = steps;
  summary["skipped_steps"] = static_cast<std::int64_t>(skipped);
  summary["warmup_steps"] = warmup;
  summary["ranks_recorded"] = ranks_of(times);
  summary["wall_time_s"] = previous.value("wall_time_s", 0.0) + invocation_wall_s;
  summary["time_to_first_step_s"] =
      time_to_first_step_s ? json(*time_to_first_step_s) : previous.value("time_to_first_step_s", json(nullptr));
  summary["invocations"] = previous.value("invocations", 0) + 1;
  summary["phases"] = compare::phases_json(compare::phase_breakdown(store, run_id));
  return summary;
}

}  // namespace expctl::run
