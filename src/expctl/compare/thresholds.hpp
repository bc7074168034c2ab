#pragma once
/// Regression thresholds, the table of summary metrics, and the verdict for one metric.
///
/// A threshold is the change of B against A that is still tolerated, written the way the spec's
/// `regression` block and `--threshold name=VALUE` take it:
///   "5%", "-5%", "+2%"   relative to A (a fraction of A's value: -5% is a drop of 5 % of A)
///   "-0.5pp"             percentage points, for metrics that are fractions in 0..1 (0.005 of 1)
///   "0.002", "-0.5"      absolute, in the metric's own unit
/// The sign, when written, must point in the metric's worse direction ("-5%" for throughput,
/// "+2%" for a loss); without a sign the worse direction comes from the metric table. The same
/// tolerance in the better direction marks an improvement.
///
/// Accuracy-like metrics (eval_accuracy, comm_wait_fraction) are fractions in 0..1, the value the
/// trainer computes (correct / total) and what JSON consumers expect; "points" therefore need
/// the explicit "pp" suffix, and a bare "-0.5" for eval_accuracy means half of the whole range.

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/compare/statistics.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::compare {

/// Which way a metric gets better.
enum class Direction {
  higher_is_better,
  lower_is_better,
};

/// "higher" or "lower" (the spelling for JSON reports and a custom metric's direction).
std::string_view to_string(Direction direction);

/// Parses "higher" or "lower"; nullopt for anything else.
std::optional<Direction> parse_direction(std::string_view text);

/// The unit a threshold was written in.
enum class ThresholdUnit {
  percent,            ///< "5%": relative to A
  percentage_points,  ///< "0.5pp": absolute, 1 pp = 0.01 (for fractions in 0..1)
  absolute,           ///< "0.002": absolute, in the metric's unit
};

/// The sign a threshold was written with.
enum class ThresholdSign { none, plus, minus };

/// A parsed threshold; see the file comment for the grammar.
struct Threshold {
  ThresholdUnit unit = ThresholdUnit::percent;
  ThresholdSign sign = ThresholdSign::none;
  double amount = 0;  ///< as written, without its sign: 5 for "-5%", 0.5 for "-0.5pp"

  /// True for percent thresholds (compared with the relative delta).
  bool is_relative() const { return unit == ThresholdUnit::percent; }
  /// The tolerated change in comparison units: a fraction of A for percent (0.05 for "5%"),
  /// metric units otherwise (0.005 for "0.5pp", 0.002 for "0.002"). Never negative.
  double tolerance() const;
  /// Canonical spelling, parseable again: "-5%", "+2%", "5%", "-0.5pp", "0.002".
  std::string to_string() const;

  friend bool operator==(const Threshold&, const Threshold&) = default;
};

/// Parses a threshold, or says what is wrong with it (the message names the text and the three
/// accepted forms). Leading and trailing blanks are ignored.
util::Expected<Threshold> try_parse_threshold(std::string_view text);

/// As try_parse_threshold, throwing util::CompareError (exit 2) on bad input.
Threshold parse_threshold(std::string_view text);

/// A threshold given as a bare number (a YAML number in the spec's regression block): absolute,
/// signed like the number. Throws util::CompareError for a non-finite value.
Threshold threshold_from_number(double value);

/// One `--threshold NAME=VALUE` option.
struct ThresholdOverride {
  std::string metric;
  Threshold threshold;
};

/// Parses "NAME=VALUE" (e.g. "samples_per_sec=-3%"); throws util::CompareError naming the option.
ThresholdOverride parse_threshold_override(std::string_view option);

/// Throws util::CompareError when a signed threshold points in the metric's better direction
/// ("+5%" for a higher-is-better metric would call every speed-up a regression).
void check_threshold_direction(std::string_view metric, const Threshold& threshold, Direction direction);

// ---------------------------------------------------------------------------------------------
// Summary metrics.

/// Which statistic of a metric's samples the threshold is applied to.
enum class Statistic {
  value,   ///< one value per run (final loss, accuracy); across a group of runs: the median
  median,  ///< median of the per-step samples
  p95,     ///< 95th percentile of the per-step samples (tail latency)
};

/// "value", "median" or "p95".
std::string_view to_string(Statistic statistic);

/// One summary metric that compare knows: how it is judged by default.
struct MetricInfo {
  std::string_view name;
  Direction direction;
  std::string_view default_threshold;  ///< in parse_threshold() spelling
  std::string_view unit;               ///< for reports; "fraction" means 0..1
  std::string_view series;             ///< per-step series its samples come from; "" = per run
  Statistic statistic;
  std::string_view doc;
  /// A timing metric: judged on one value per run against the run-to-run noise (run_noise.hpp),
  /// never on per-step samples. Correctness metrics (losses, accuracy) are judged exactly or by
  /// threshold instead.
  bool timing = false;
};

/// The metric table: every default threshold lives here, nowhere else.
inline constexpr MetricInfo k_metrics[] = {
    {util::summary_key::samples_per_sec, Direction::higher_is_better, "-5%", "samples/s", util::metric::samples_per_sec,
     Statistic::median, "training throughput of all ranks together, per step", true},
    {util::summary_key::step_time_ms_p50, Direction::lower_is_better, "+5%", "ms", util::metric::step_time_ms,
     Statistic::median, "median wall time of one optimizer step", true},
    {util::summary_key::step_time_ms_p95, Direction::lower_is_better, "+5%", "ms", util::metric::step_time_ms,
     Statistic::p95, "95th percentile of the step time: stragglers and stalls", true},
    {util::summary_key::comm_wait_fraction, Direction::lower_is_better, "+5pp", "fraction", "", Statistic::value,
     "share of step time spent waiting for gradient all-reduce, 0..1", true},
    {util::summary_key::final_train_loss, Direction::lower_is_better, "+2%", "", "", Statistic::value,
     "training loss at the last step"},
    {util::summary_key::eval_loss, Direction::lower_is_better, "+2%", "", "", Statistic::value,
     "loss on the evaluation split"},
    {util::summary_key::eval_accuracy, Direction::higher_is_better, "-0.5pp", "fraction", "", Statistic::value,
     "accuracy on the evaluation split, 0..1"},
};

/// The table row for `name`, or nullptr for a metric compare has no defaults for.
const MetricInfo* find_metric(std::string_view name);

/// The parsed default threshold of a table row.
Threshold default_threshold(const MetricInfo& metric);

// ---------------------------------------------------------------------------------------------
// Verdicts.

/// The outcome for one metric.
enum class Status {
  ok,               ///< within the threshold, or beyond it without statistical evidence
  regression,       ///< worse beyond the threshold (and significant, for samples)
  improvement,      ///< better beyond the threshold (and significant, for samples)
  too_few_samples,  ///< not enough samples on a side to conclude either way
  /// A timing metric the evidence cannot decide: the run-to-run noise is unknown (one run a side
  /// and no earlier runs) or too large, or the change crossed the threshold inside the noise.
  inconclusive,
};

/// "ok", "regression", "improvement", "too few samples" or "inconclusive".
std::string_view to_string(Status status);

/// Which test decides significance for a sampled metric.
enum class SignificanceTest {
  /// Mann–Whitney U, for the median (and per-run values): it detects a shift of the whole
  /// distribution and needs no resampling.
  mann_whitney,
  /// The bootstrap of the p95 ratio, for tail statistics: stalls in a few percent of the steps
  /// move the p95 a lot but the ranks hardly at all, so the U test would miss them.
  bootstrap,
  /// Student's paired t test on the per-pair differences, for groups paired by seed (repeat i of
  /// A and of B both run with seed i, as `expctl ab --vary-seed` runs them).
  paired_t,
};

/// "mann-whitney", "bootstrap" or "paired-t".
std::string_view to_string(SignificanceTest test);

/// The statistical evidence behind a verdict on samples.
struct SampleEvidence {
  MannWhitneyResult test;  ///< always computed, whichever test decides
  /// Bootstrap CI of statistic(B) / statistic(A) (median or p95); nullopt when undefined.
  std::optional<ConfidenceInterval> ratio;
  SignificanceTest decided_by = SignificanceTest::mann_whitney;
  double p_value = 1;     ///< raw p-value of the deciding test
  double adjusted_p = 1;  ///< Holm-adjusted across the sampled metrics judged together
  double level = 0;       ///< the level p_value had to meet in Holm's step-down (holm_levels)
  double alpha = 0;       ///< the family-wise level
  size_t family = 1;      ///< metrics in that Holm family
  /// The paired test (decided_by paired_t): the mean change with its 95 % interval, on the
  /// comparison scale (log ratios for percent thresholds, metric units otherwise).
  std::optional<PairedTest> paired;
  /// The paired mean change and its 95 % interval in the threshold's terms (a fraction of A for
  /// percent thresholds); NaN unless paired.
  double change = std::numeric_limits<double>::quiet_NaN();
  double change_low = std::numeric_limits<double>::quiet_NaN();
  double change_high = std::numeric_limits<double>::quiet_NaN();
};

/// How a verdict line states its test: "paired-t p = 0.0044 > 0.0033, Holm over 3 metrics at
/// level 0.01", "t-test p = 0.0011 <= 0.01, one metric at level 0.01", or, when Holm's step-down
/// stopped at a smaller p first, "… p = 0.004 <= 0.005, but a smaller p failed first (Holm-adjusted
/// 0.012 > 0.01), …". Every verdict that rests on a p-value says the test, the level it had to
/// meet and the correction this way.
std::string significance_text(std::string_view test, double p_value, double adjusted_p, double level, double alpha,
                              size_t family);

/// Scale on which a timing metric's run values are compared: relative (log of the values, for
/// percent thresholds) or absolute (the values themselves, for pp and absolute thresholds).
enum class Scale { relative, absolute };

/// Run-to-run noise of one metric, estimated from groups of runs of one configuration each.
struct NoiseEstimate {
  /// Robust standard deviation of one run's value (pooled_huber_scale): of ln(value) for the
  /// relative scale (≈ a fraction: 0.03 is ±3 %), in metric units for the absolute one. NaN: unknown.
  double sigma = std::numeric_limits<double>::quiet_NaN();
  double df = 0;      ///< effective degrees of freedom: 0.9 · Σ (group size − 1); 0 when unknown
  size_t runs = 0;    ///< runs in groups of two or more
  size_t groups = 0;  ///< groups of two or more runs
  bool known() const { return df > 0 && std::isfinite(sigma); }
};

/// The run-level evidence behind a timing verdict (judge_run_level in run_noise.hpp). Changes,
/// noise, band and MDE are in the threshold's terms: fractions of A for relative metrics
/// (0.05 = 5 %), metric units otherwise.
struct RunLevelEvidence {
  Scale scale = Scale::relative;
  size_t runs_a = 0;  ///< runs of side A (one value each)
  size_t runs_b = 0;
  size_t history_runs = 0;  ///< earlier runs whose values entered the noise estimate
  NoiseEstimate noise;      ///< pooled over the sides' groups and the history
  double noise_fraction = std::numeric_limits<double>::quiet_NaN();  ///< sigma in the threshold's terms
  double change = 0;  ///< Hodges–Lehmann shift of B against A (signed; negative = B lower)
  double standard_error = std::numeric_limits<double>::quiet_NaN();  ///< of the change, threshold's terms
  double band = std::numeric_limits<double>::quiet_NaN();            ///< |change| that would just be significant
  double mde = std::numeric_limits<double>::quiet_NaN();             ///< minimum detectable effect (worse direction)
  double t = 0;                 ///< change / standard error, on the comparison scale
  double p_value = 1;           ///< two-sided, from Student's t with noise.df degrees of freedom
  double adjusted_p = 1;        ///< Holm-adjusted across the timing metrics judged together
  double level = 0;             ///< the level p_value had to meet in Holm's step-down (holm_levels)
  double alpha = 0;             ///< the family-wise level
  size_t family = 1;            ///< timing metrics in that Holm family
  /// 95 % interval of the change (t with noise.df degrees of freedom), threshold's terms; NaN
  /// when the noise is unknown.
  double ci_low = std::numeric_limits<double>::quiet_NaN();
  double ci_high = std::numeric_limits<double>::quiet_NaN();
  size_t suggested_repeat = 0;  ///< runs a side that would decide it (inconclusive only; 0: none)
};

/// The verdict for one metric, with everything a report prints.
struct Verdict {
  std::string metric;
  Status status = Status::ok;
  double a = 0;                            ///< A's value, or the statistic of A's samples; NaN when A has no samples
  double b = 0;                            ///< same for B
  double absolute_delta = 0;               ///< b − a
  std::optional<double> relative_delta;    ///< (b − a) / |a|; nullopt when a is 0 or not finite
  bool threshold_crossed = false;          ///< worse than A by more than the tolerance
  std::optional<SampleEvidence> evidence;  ///< set for samples that were tested
  std::optional<RunLevelEvidence> run_evidence;  ///< set for timing metrics (run-level)
  std::string reason;                            ///< one line: why this status
};

/// Judges one value per side: regression when B is worse than A by more than the tolerance,
/// improvement when better by more than it, ok otherwise (a change exactly at the tolerance is
/// ok). A relative threshold against A = 0 counts any change as beyond it. A non-finite B
/// against a finite A is a regression (a loss that became NaN); the reverse an improvement.
Verdict judge_values(std::string_view metric, double a, double b, const Threshold& threshold, Direction direction);

/// One metric with samples on both sides: one value per run for groups of repeated runs (seeds)
/// of a correctness metric. (Timing metrics are judged by judge_run_level, run_noise.hpp; per-step
/// values are never samples across runs.)
struct SampledMetric {
  std::string name;
  Direction direction = Direction::higher_is_better;
  Threshold threshold;
  Statistic statistic = Statistic::median;  ///< value is treated as median
  std::vector<double> a;
  std::vector<double> b;
  /// a[i] and b[i] are a pair (the same seed): judged by the paired t test on their differences
  /// instead of Mann–Whitney. Both sides then have the same length.
  bool paired = false;
};

/// Fewest pairs a paired test concludes from: two degrees of freedom. With one, a t of 64 is
/// needed for p ≤ 0.01, and any two seeds that happen to agree would decide.
inline constexpr size_t k_min_pairs = 3;

/// How samples are judged.
struct SampleOptions {
  /// Family-wise error rate across the metrics judged together, two-sided: the timing metrics'
  /// level (NoiseOptions), so one level answers every question and an unchanged configuration is
  /// flagged in at most 1 % of comparisons.
  double alpha = 0.01;
  size_t min_samples = k_min_samples_per_side;
  size_t min_pairs = k_min_pairs;
  /// The seed is mixed with each metric's name: metrics draw independent resamples, and adding
  /// or reordering metrics never changes another metric's interval.
  BootstrapOptions bootstrap;
};

/// Judges several sampled metrics together. A metric with fewer than min_samples on a side (or,
/// paired, fewer than min_pairs pairs) is "too few samples" and takes no part in the correction.
/// The others get a Mann–Whitney U test and a bootstrap interval of the ratio of their statistic,
/// or, paired, the paired t test of the differences (log ratios for a percent threshold); the
/// deciding test (U for medians, the bootstrap for p95, paired t for pairs, see SignificanceTest)
/// is Holm-adjusted across them. A regression needs
/// both: the statistic worse beyond the threshold, and an adjusted p ≤ alpha with the test's
/// effect pointing the same way; an improvement likewise. Throws util::CompareError naming the
/// metric when a sample is not finite.
std::vector<Verdict> judge_samples(std::span<const SampledMetric> metrics, const SampleOptions& options);

}  // namespace expctl::compare
