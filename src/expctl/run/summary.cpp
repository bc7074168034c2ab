#include "expctl/run/summary.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/compare/statistics.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::run {
namespace {

namespace metric = util::metric;

std::optional<double> or_none(const std::vector<double>& values, double (*statistic)(std::span<const double>)) {
  return values.empty() ? std::nullopt : std::optional<double>(statistic(values));
}

double p50(std::span<const double> values) { return compare::percentile(values, 50.0); }
double p95(std::span<const double> values) { return compare::percentile(values, 95.0); }

std::vector<store::MetricPoint> series(const store::Store& store, const std::string& run_id, const char* name,
                                       std::optional<int> rank = std::nullopt) {
  return store.metrics(run_id, {.name = std::string(name), .rank = rank});
}

// Σ comm_wait_ms / Σ step_time_ms over every rank's steps after warm-up; null when no rank timed
// its communication wait (a program's run): not measured is not 0.
std::optional<double> wait_fraction(const std::vector<store::MetricPoint>& waits,
                                    const std::vector<store::MetricPoint>& times, std::int64_t warmup) {
  const auto total = [warmup](const std::vector<store::MetricPoint>& points) {
    double sum = 0.0;
    for (const auto& point : points) {
      sum += point.step > warmup && std::isfinite(point.value) ? point.value : 0.0;
    }
    return sum;
  };
  const double time_total = total(times);
  return time_total > 0.0 && !waits.empty() ? std::optional<double>(total(waits) / time_total) : std::nullopt;
}

std::size_t ranks_of(const std::vector<store::MetricPoint>& points) {
  std::map<int, bool> ranks;
  for (const auto& point : points) {
    ranks[point.rank] = true;
  }
  return ranks.size();
}

std::optional<double> last_value(const std::vector<store::MetricPoint>& points) {
  return points.empty() ? std::nullopt : std::optional<double>(points.back().value);
}

// Rank 0's logged steps: its loss's, or (a program that logs no loss) those of any of its series.
std::vector<std::int64_t> rank0_steps(const store::Store& store, const std::string& run_id,
                                      const std::vector<store::MetricPoint>& losses) {
  std::set<std::int64_t> steps;
  for (const auto& point : losses.empty() ? store.metrics(run_id, {.rank = 0}) : losses) {
    steps.insert(point.step);
  }
  return {steps.begin(), steps.end()};
}

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> missing_step_ranges(const std::vector<std::int64_t>& steps) {
  std::map<std::int64_t, std::size_t> gaps;  // gap -> how often
  for (std::size_t i = 1; i < steps.size(); ++i) {
    ++gaps[steps[i] - steps[i - 1]];
  }
  const auto usual =
      std::max_element(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (usual == gaps.end() || usual->first <= 0 || usual->second * 10 < (steps.size() - 1) * 9) {
    return {};
  }
  const std::int64_t stride = usual->first;
  std::vector<std::pair<std::int64_t, std::int64_t>> missing;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    if (steps[i] - steps[i - 1] > stride) {
      missing.emplace_back(steps[i - 1] + stride, steps[i] - (steps[i] - steps[i - 1] - 1) % stride - 1);
    }
  }
  return missing;
}

compare::RunSummary compute_summary(const store::Store& store, const std::string& run_id,
                                    const compare::RunSummary& previous, double invocation_wall_s,
                                    std::optional<double> time_to_first_step_s) {
  std::vector<double> losses;
  const auto loss_points = series(store, run_id, metric::loss, 0);
  for (const auto& point : loss_points) {
    losses.push_back(point.value);
  }
  const auto steps = static_cast<std::int64_t>(losses.size());
  const auto warmup = compare::default_warmup_steps(steps);
  const auto times = series(store, run_id, metric::step_time_ms);
  const auto slowest = compare::step_samples(times, warmup, /*sum=*/false);
  const auto rate = compare::step_samples(series(store, run_id, metric::samples_per_sec), warmup, /*sum=*/true);
  double skipped = 0.0;
  for (const auto& point : series(store, run_id, metric::skipped, 0)) {
    skipped += point.value;
  }
  compare::RunSummary summary;
  summary.final_train_loss = losses.empty() ? std::nullopt : std::optional<double>(losses.back());
  summary.eval_loss = last_value(series(store, run_id, metric::eval_loss, 0));
  summary.eval_accuracy = last_value(series(store, run_id, metric::eval_accuracy, 0));
  summary.samples_per_sec = or_none(rate, compare::median);
  summary.step_time_ms_p50 = or_none(slowest, p50);
  summary.step_time_ms_p95 = or_none(slowest, p95);
  summary.comm_wait_fraction = wait_fraction(series(store, run_id, metric::comm_wait_ms), times, warmup);
  if (!losses.empty()) {
    summary.loss_curve_sha256 = compare::loss_curve_sha256(losses);
  }
  summary.steps = steps;
  summary.skipped_steps = static_cast<std::int64_t>(skipped);
  summary.warmup_steps = warmup;
  summary.ranks_recorded = static_cast<std::int64_t>(ranks_of(times));
  summary.wall_time_s = previous.wall_time_s.value_or(0.0) + invocation_wall_s;
  summary.time_to_first_step_s = time_to_first_step_s ? time_to_first_step_s : previous.time_to_first_step_s;
  summary.invocations = previous.invocations + 1;
  summary.phases = compare::phases_json(compare::phase_breakdown(store, run_id));
  if (const auto missing = missing_step_ranges(rank0_steps(store, run_id, loss_points)); !missing.empty()) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const auto& [first, last] : missing) {
      ranges.push_back({first, last});
    }
    summary.others[util::summary_key::missing_steps] = ranges;
  }
  return summary;
}

}  // namespace expctl::run
