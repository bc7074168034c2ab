#pragma once
/// Simulated training runs for the run-level statistics tests: each run has its own speed (the
/// between-run noise: machine state, clock frequency, cache and allocator luck), and its steps
/// wander around it with autocorrelated noise and rare stalls, as real step times do. A run's
/// values are what the runner's summary records: the median samples/s and the median and p95 step
/// time after warm-up. Seeded (noise.hpp), so every figure a test asserts is reproducible.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "noise.hpp"

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/run_noise.hpp"
#include "expctl/compare/statistics.hpp"

namespace expctl::compare::testing {

struct RunModel {
  double samples_per_sec = 4000;  ///< of the configuration, on average over runs
  double between = 0.05;          ///< between-run noise: standard deviation of ln(speed) from run to run
  double step_noise = 0.05;       ///< standard deviation of ln(step time) within a run
  double autocorrelation = 0.9;   ///< lag-1 autocorrelation of that within-run noise (AR(1))
  double stall_rate = 0.01;       ///< share of steps that take three times as long
  size_t steps = 200;
};

/// One run's summary values of the three timing metrics.
struct SimulatedRun {
  double samples_per_sec = 0;
  double step_time_ms_p50 = 0;
  double step_time_ms_p95 = 0;
};

/// A run whose steps take `slowdown` times as long as the model's (1.25: 20 % fewer samples/s).
inline SimulatedRun simulate_run(Noise& noise, const RunModel& model, double slowdown = 1.0) {
  const double batch = 64;
  const double run_ms = 1000 * batch / model.samples_per_sec * slowdown * std::exp(model.between * noise.normal());
  const double innovation = model.step_noise * std::sqrt(1 - model.autocorrelation * model.autocorrelation);
  std::vector<double> times;
  std::vector<double> rates;
  double wander = model.step_noise * noise.normal();
  const auto warmup = default_warmup_steps(static_cast<std::int64_t>(model.steps));
  for (size_t step = 1; step <= model.steps; ++step) {
    wander = model.autocorrelation * wander + innovation * noise.normal();
    const double stall = noise.uniform() < model.stall_rate ? 3.0 : 1.0;
    const double time = run_ms * std::exp(wander) * stall;
    if (static_cast<std::int64_t>(step) > warmup) {
      times.push_back(time);
      rates.push_back(1000 * batch / time);
    }
  }
  return {median(rates), percentile(times, 50), percentile(times, 95)};
}

/// How many runs each side and the history have.
struct Scenario {
  size_t runs_a = 1;
  size_t runs_b = 1;
  size_t history = 0;  ///< earlier runs of A's configuration
};

/// The three timing metrics of one simulated comparison, ready for judge_run_level.
inline std::vector<RunLevelMetric> simulate_comparison(Noise& noise, const RunModel& model, const Scenario& scenario,
                                                       double slowdown) {
  std::vector<RunLevelMetric> metrics(3);
  const char* names[] = {"samples_per_sec", "step_time_ms_p50", "step_time_ms_p95"};
  for (size_t i = 0; i < 3; ++i) {
    const MetricInfo& info = *find_metric(names[i]);
    metrics[i] = {names[i], info.direction, default_threshold(info), {}, {}, {{}}};
  }
  const auto add = [&](size_t count, double factor, auto member) {
    for (size_t i = 0; i < count; ++i) {
      const SimulatedRun run = simulate_run(noise, model, factor);
      (metrics[0].*member).push_back(run.samples_per_sec);
      (metrics[1].*member).push_back(run.step_time_ms_p50);
      (metrics[2].*member).push_back(run.step_time_ms_p95);
    }
  };
  add(scenario.runs_a, 1.0, &RunLevelMetric::a);
  add(scenario.runs_b, slowdown, &RunLevelMetric::b);
  for (size_t i = 0; i < scenario.history; ++i) {
    const SimulatedRun run = simulate_run(noise, model);
    metrics[0].history[0].push_back(run.samples_per_sec);
    metrics[1].history[0].push_back(run.step_time_ms_p50);
    metrics[2].history[0].push_back(run.step_time_ms_p95);
  }
  return metrics;
}

/// Counts of each outcome over simulated comparisons (a comparison regresses when any metric does).
struct OutcomeRates {
  size_t comparisons = 0;
  size_t regression = 0;
  size_t ok = 0;
  size_t inconclusive = 0;
  size_t improvement = 0;
  double rate(size_t count) const { return static_cast<double>(count) / static_cast<double>(comparisons); }
};

inline OutcomeRates simulate_outcomes(uint64_t seed, const RunModel& model, const Scenario& scenario, double slowdown,
                                      size_t comparisons) {
  Noise noise(seed);
  OutcomeRates rates;
  rates.comparisons = comparisons;
  for (size_t i = 0; i < comparisons; ++i) {
    const auto verdicts = judge_run_level(simulate_comparison(noise, model, scenario, slowdown));
    const auto any = [&](Status status) {
      return std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) { return v.status == status; });
    };
    if (any(Status::regression))
      ++rates.regression;
    else if (any(Status::inconclusive))
      ++rates.inconclusive;
    else if (any(Status::improvement))
      ++rates.improvement;
    else
      ++rates.ok;
  }
  return rates;
}

}  // namespace expctl::compare::testing
