#pragma once
/// A seeded simulation of loss questions answered across seeds, for the tests and for
/// bench/compare/seed_power.cpp (which prints the rates docs/compare.md quotes).
///
/// Model: seed i's luck (initialisation, data order) moves every correctness metric of both sides
/// alike: ln(final loss) by σ_seed·zᵢ, ln(eval loss) by σ_seed·(0.8·zᵢ + 0.6·z′ᵢ), eval accuracy
/// by −0.01·zᵢ (one point of accuracy per standard deviation). Side B adds the true change δ to
/// the final and eval losses, and its own trajectory noise: a change that perturbs training makes
/// seed i's run of B differ from A's by more than δ, σ_pair·wᵢ on the log losses (and 0.01·σ_pair
/// … on accuracy, proportionally). Each comparison judges the three metrics together (Holm), with
/// the real compare::compare_runs over in-memory runs paired by seed, as `expctl ab --vary-seed`
/// records them. Runs are distinct trajectories (every loss_curve_sha256 differs).

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "noise.hpp"

#include "expctl/compare/comparison.hpp"

namespace expctl::compare::testing {

struct SeedModel {
  double sigma_seed = 0.03;  ///< spread of ln(final loss) between seeds
  double sigma_pair = 0.003; ///< spread of ln(loss_B / loss_A) within one seed, beyond the true change
  double change = 0;         ///< true relative change of B's losses (0.01: 1 % higher)
  size_t seeds = 5;
};

struct SeedOutcome {
  Comparison comparison;
  const MetricRow* final_loss = nullptr;
};

inline RunData simulated_run(const std::string& id, const std::string& spec_hash, int seed, double final_loss,
                             double eval_loss, double eval_accuracy) {
  RunData run;
  run.record.id = id;
  run.record.name = "simulated";
  run.record.spec_hash = spec_hash;
  run.record.status = store::RunStatus::completed;
  run.spec = {{"name", "simulated"}, {"seed", seed}, {"data", {{"dataset", "synthetic"}}}};
  run.summary = {{"final_train_loss", final_loss},
                 {"eval_loss", eval_loss},
                 {"eval_accuracy", eval_accuracy},
                 {"loss_curve_sha256", id}};
  return run;
}

/// One A/B comparison of `model.seeds` seed pairs; `thresholds` as --threshold would give them.
inline Comparison simulate_seed_ab(const SeedModel& model, Noise& noise,
                                   const std::vector<ThresholdOverride>& thresholds = {}) {
  std::vector<RunData> a;
  std::vector<RunData> b;
  const double shift = std::log1p(model.change);
  for (size_t i = 0; i < model.seeds; ++i) {
    const int seed = static_cast<int>(i + 1);
    const double z = noise.normal();
    const double z_eval = 0.8 * z + 0.6 * noise.normal();
    const double w = noise.normal();
    const double w_eval = 0.8 * w + 0.6 * noise.normal();
    const double loss_a = 0.5 * std::exp(model.sigma_seed * z);
    const double eval_a = 0.55 * std::exp(model.sigma_seed * z_eval);
    const double accuracy_a = 0.85 - 0.01 * z;
    a.push_back(simulated_run(fmt::format("a{}", i), "spec-a", seed, loss_a, eval_a, accuracy_a));
    b.push_back(simulated_run(fmt::format("b{}", i), "spec-b", seed, loss_a * std::exp(shift + model.sigma_pair * w),
                              eval_a * std::exp(shift + model.sigma_pair * w_eval),
                              accuracy_a - 0.01 * model.sigma_pair / model.sigma_seed * w));
  }
  CompareOptions options;
  options.thresholds = thresholds;
  return compare_runs(a, b, options);
}

inline const MetricRow& row_named(const Comparison& comparison, std::string_view metric) {
  for (const auto& row : comparison.metrics) {
    if (row.verdict.metric == metric)
      return row;
  }
  throw std::runtime_error("no row " + std::string(metric));
}

/// Rates over `trials` comparisons.
struct SeedRates {
  size_t trials = 0;
  double any_significant = 0;      ///< some metric significant after Holm, either way (A/A: false positives)
  double any_flagged = 0;          ///< some metric's status is regression or improvement
  double loss_detected = 0;        ///< final_train_loss significant after Holm and worse (B's loss higher)
  double loss_regression = 0;      ///< final_train_loss status regression
};

inline SeedRates seed_rates(const SeedModel& model, size_t trials, uint64_t seed,
                            const std::vector<ThresholdOverride>& thresholds = {}) {
  Noise noise(seed);
  SeedRates rates;
  rates.trials = trials;
  for (size_t trial = 0; trial < trials; ++trial) {
    const Comparison comparison = simulate_seed_ab(model, noise, thresholds);
    bool significant = false;
    bool flagged = false;
    for (const auto& row : comparison.metrics) {
      const auto& evidence = row.verdict.evidence;
      significant = significant || (evidence && evidence->adjusted_p <= evidence->alpha);
      flagged = flagged || row.verdict.status == Status::regression || row.verdict.status == Status::improvement;
    }
    const MetricRow& loss = row_named(comparison, "final_train_loss");
    const bool loss_significant = loss.verdict.evidence && loss.verdict.evidence->adjusted_p <= loss.verdict.evidence->alpha;
    rates.any_significant += significant;
    rates.any_flagged += flagged;
    rates.loss_detected += loss_significant && loss.verdict.evidence->change > 0;
    rates.loss_regression += loss.verdict.status == Status::regression;
  }
  for (double* rate : {&rates.any_significant, &rates.any_flagged, &rates.loss_detected, &rates.loss_regression}) {
    *rate /= static_cast<double>(trials);
  }
  return rates;
}

}  // namespace expctl::compare::testing
