#pragma once
/// Timing metrics judged on the evidence that matters: one value per run, against run-to-run noise.
///
/// The steps of one run share its machine state (clock frequency, cache and allocator luck, other
/// load), so they never sample the variation between runs: per-step tests on two runs call half
/// of all identical pairs a regression. Here the run is the unit of evidence. Each run contributes
/// one value per timing metric (its summary value, e.g. the median samples/s after warm-up); the
/// change is the Hodges–Lehmann shift between the sides; the noise is the pooled Huber scale of
/// every group of runs of one configuration (a side's repeats, earlier runs of the same spec on
/// the same environment); the test is Student's t with the estimate's effective degrees of
/// freedom, Holm-adjusted across the timing metrics judged together.
///
/// Verdicts (docs/compare.md, "How a timing verdict is reached"):
///   regression    the change is worse than the threshold and significant (adjusted p ≤ alpha)
///   improvement   better than the threshold and significant
///   inconclusive  the noise is unknown (no group of two runs anywhere); or the change is worse
///                 than the threshold but not significant; or it is within the threshold but the
///                 change's standard error exceeds the threshold (a regression could hide in it)
///   ok            otherwise: within the threshold on evidence precise enough to tell
/// Every verdict carries the noise, the significance band and the minimum detectable effect.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/compare/thresholds.hpp"

namespace expctl::compare {

/// How timing metrics are judged.
struct NoiseOptions {
  /// Family-wise error rate across the timing metrics judged together (two-sided, Holm): an
  /// unchanged configuration is called a regression in at most alpha/2 of comparisons.
  double alpha = 0.01;
  double power = 0.8;         ///< for the minimum detectable effect
  size_t max_repeat = 30;     ///< the largest --repeat a reason suggests
  size_t unknown_repeat = 5;  ///< suggested when the noise is unknown
};

/// Degrees of freedom credited per run beyond the first of a group: the Huber scale estimate
/// (pooled_huber_scale) spreads like a χ² with about 0.9 of the standard deviation's.
inline constexpr double k_noise_df_efficiency = 0.9;

/// One timing metric to judge.
struct RunLevelMetric {
  std::string name;
  Direction direction = Direction::higher_is_better;
  Threshold threshold;
  std::vector<double> a;  ///< one value per run of side A (the baseline)
  std::vector<double> b;  ///< one value per run of side B (the candidate)
  /// Values of earlier runs, one group per configuration (spec hash + environment hash). Only
  /// their spread enters (each group has its own centre), never their level.
  std::vector<std::vector<double>> history;
};

/// The comparison scale of a threshold: relative for percent thresholds, absolute otherwise.
Scale scale_of(const Threshold& threshold);

/// Run-to-run noise on `scale` from groups of runs, one configuration each. Non-finite values,
/// and values ≤ 0 on the relative scale, are left out; groups of fewer than two values add nothing.
NoiseEstimate estimate_noise(std::span<const std::vector<double>> groups, Scale scale);

/// The noise of one run in the threshold's terms: a fraction for the relative scale (0.03 for
/// ±3 %), metric units otherwise. NaN when unknown.
double noise_in_threshold_terms(const NoiseEstimate& noise, Scale scale);

/// The smallest true change in the worse direction that `runs_a` against `runs_b` runs would
/// call significant with probability options.power, in the threshold's terms, when `family`
/// timing metrics are judged together; NaN when the noise is unknown.
double minimum_detectable_effect(const NoiseEstimate& noise, size_t runs_a, size_t runs_b, Scale scale,
                                 Direction direction, size_t family, const NoiseOptions& options);

/// Runs a side (2..options.max_repeat) that bring the minimum detectable effect down to `target`
/// (threshold's terms) when the future runs add their own spread to `history` (the noise known
/// without them) at the level `sigma` (log or metric units); 0 when even max_repeat does not.
size_t runs_needed(const NoiseEstimate& history, double sigma, double target, Scale scale, Direction direction,
                   size_t family, const NoiseOptions& options);

/// One line for a suite entry whose threshold is below the run-to-run noise of its metric, e.g.
/// "threshold -3% of samples_per_sec is below its run-to-run noise of ±5.1% (8 runs): widen it or
/// use --repeat"; nullopt when the noise is unknown or below the threshold.
std::optional<std::string> threshold_below_noise(std::string_view metric, const Threshold& threshold,
                                                 const NoiseEstimate& noise);

/// A change in the threshold's unit, signed: "-6.8%", "+1.20pp", "+0.002".
std::string change_text(double change, const Threshold& threshold);

/// A size (noise, band, MDE) in the threshold's unit, unsigned: "9.0%", "1.20pp", "0.002";
/// ">1000%" beyond that.
std::string size_text(double size, const Threshold& threshold);

/// Judges timing metrics together (one Holm family over those whose noise is known). A metric
/// with no usable value on a side is `too few samples`. Throws nothing.
std::vector<Verdict> judge_run_level(std::span<const RunLevelMetric> metrics, const NoiseOptions& options = {});

/// judge_run_level of one metric alone (a family of one).
Verdict judge_run_level(const RunLevelMetric& metric, const NoiseOptions& options = {});

}  // namespace expctl::compare
