#pragma once
/// Statistics for `expctl compare`: descriptive helpers, the two-sided Mann–Whitney U test, a
/// bootstrap confidence interval of the ratio of medians, Holm's correction across metrics, the
/// bitwise comparison of two loss curves, and the run-level tools (Student's t, the
/// Hodges–Lehmann shift, robust pooled scales). Pure functions over plain numbers: no database,
/// no I/O, no global state; every random draw comes from a seed the caller passes.
///
/// Why these methods:
/// - Timing metrics are judged on one value per run (run_noise.hpp): the steps of one run share
///   its machine state and never sample the variation between runs. With a handful of runs the
///   tools are the t distribution (small, fractional degrees of freedom), a robust shift
///   (Hodges–Lehmann) and a robust but efficient scale (one-step Huber from the Shamos estimate).
/// - Correctness metrics over groups of runs (seeds) are skewed and few, so their test is
///   rank-based (Mann–Whitney U, as asv and Google Benchmark's compare.py use) and the summary is
///   the median; the bootstrap interval of median(B)/median(A) says by how much.
/// - Several metrics are tested per comparison, so p-values are Holm-adjusted: it controls the
///   family-wise error like Bonferroni but is uniformly more powerful, and needs no independence
///   assumption between metrics (throughput and step time are strongly dependent).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace expctl::compare {

// ---------------------------------------------------------------------------------------------
// Descriptive statistics. Every function takes the values in any order and never modifies them;
// an empty span is a caller bug (EXPCTL_ASSERT), since "no samples" is decided before this point.

/// Arithmetic mean.
double mean(std::span<const double> values);

/// Sample standard deviation (Bessel's n-1 denominator, the estimate of the population spread
/// that numpy calls ddof=1); 0 for a single value, where no spread can be observed.
double stddev(std::span<const double> values);

/// The q-th percentile, q in [0, 100], by linear interpolation between closest ranks: with the
/// values sorted x[0..n-1] and h = (n-1)·q/100, the result is x[⌊h⌋] + (h-⌊h⌋)(x[⌊h⌋+1]-x[⌊h⌋]).
/// This is Hyndman & Fan's type 7, the default of numpy, R and Excel's PERCENTILE.INC, so a
/// user checking a number by hand in any of them gets ours. It never leaves [min, max].
double percentile(std::span<const double> values, double q);

/// The median, percentile(values, 50): the mean of the two middle values for an even count.
double median(std::span<const double> values);

/// Everything a report shows about one side's samples.
struct Summary {
  size_t count = 0;
  double mean = 0;
  double stddev = 0;
  double min = 0;
  double p50 = 0;  ///< median
  double p95 = 0;
  double max = 0;
};

/// All of Summary in one sort.
Summary summarize(std::span<const double> values);

// ---------------------------------------------------------------------------------------------
// Mann–Whitney U test (two-sided), also known as the Wilcoxon rank-sum test.

/// Below this many samples on either side compare refuses to conclude ("too few samples").
/// 5 is the smallest n at which even a perfect separation stays significant at alpha 0.05 once
/// several metrics are Holm-corrected together: the most extreme exact two-sided p-value with n
/// per side is 2/C(2n, n), i.e. 0.1 for n=3 (never significant), 0.029 for n=4 (lost as soon as
/// two metrics are tested), 0.0079 for n=5 (significant with up to six metrics at once). asv asks for 6, Google
/// Benchmark recommends 9; with per-step samples we usually have hundreds, so 5 only bites for groups of repeated runs,
/// where each sample costs a whole run.
inline constexpr size_t k_min_samples_per_side = 5;

/// Up to this many samples per side, and without ties, the p-value comes from the exact null
/// distribution of U (the classic tables stop at 20, C(40, 20) ≈ 1.4e11 arrangements still count
/// exactly in 64 bits, and the table costs < 0.2 M additions). Beyond it the normal approximation
/// with continuity correction is close: at n = 20 per side it is within 0.0023 of the exact
/// p-value wherever that lies between 0.001 and 0.2.
inline constexpr size_t k_exact_max_per_side = 20;

/// How a p-value was obtained.
enum class PValueMethod {
  exact,   ///< exact null distribution of U (small samples, no ties)
  normal,  ///< normal approximation with tie-corrected variance and continuity correction
};

/// "exact" or "normal".
std::string_view to_string(PValueMethod method);

/// The outcome of a two-sided Mann–Whitney U test of A (baseline) against B (candidate).
struct MannWhitneyResult {
  size_t n_a = 0;
  size_t n_b = 0;
  /// U of A: the number of (a, b) pairs with a > b, ties counting one half (scipy's statistic
  /// for its first argument). U of B is n_a·n_b − u_a.
  double u_a = 0;
  /// Standardised U of B with continuity correction and tie-corrected variance: positive when B
  /// tends to be larger than A. Reported even when the p-value is exact; 0 when every value is tied.
  double z = 0;
  double p_value = 1;  ///< two-sided
  PValueMethod method = PValueMethod::normal;
  /// Common-language effect size: P(B > A) + ½·P(B = A) for a random pair, in [0, 1]; 0.5 means
  /// no tendency either way, 0 means every B is below every A.
  double common_language = 0.5;
  /// Rank-biserial correlation 2·common_language − 1, in [-1, 1]; positive when B is larger.
  double rank_biserial = 0;
};

/// Two-sided Mann–Whitney U test. Values must be finite (EXPCTL_ASSERT) and both sides non-empty;
/// whether there are *enough* samples to conclude is the caller's decision (see
/// k_min_samples_per_side), the test itself is defined for any n ≥ 1.
/// Ties get mid-ranks; the p-value is exact for n_a, n_b ≤ k_exact_max_per_side without ties,
/// otherwise normal with continuity correction (scipy's method="auto" makes the same choice,
/// only switching to the normal approximation earlier, above 8 per side).
MannWhitneyResult mann_whitney_u(std::span<const double> a, std::span<const double> b);

/// P(U ≤ u) under the null hypothesis for n_a, n_b ≤ k_exact_max_per_side without ties, where U
/// is either side's statistic (the distribution is symmetric). Exposed for known-answer tests.
double exact_u_cdf(size_t n_a, size_t n_b, double u);

// ---------------------------------------------------------------------------------------------
// Bootstrap confidence interval of a ratio of percentiles, e.g. median(B) / median(A).

/// How to resample.
struct BootstrapOptions {
  /// 2000 resamples: the 2.5th and 97.5th percentiles then rest on 50 draws in each tail, which
  /// puts their Monte-Carlo error well under 1 % of the interval width for throughput-like data,
  /// the smallest p-value is 2/2001 ≈ 0.001 (still significant after Holm over 40 metrics), and
  /// the whole bootstrap of 2 × 1000 samples takes about 0.1 s.
  size_t resamples = 2000;
  /// The caller's seed (e.g. derived from the run ids) so the same comparison always prints the
  /// same interval. The generator is std::mt19937_64, whose sequence the C++ standard fixes.
  uint64_t seed = 0;
  double confidence = 0.95;  ///< two-sided coverage, in (0, 1)
};

/// A point estimate with its percentile-bootstrap interval.
struct ConfidenceInterval {
  double estimate = 0;  ///< the ratio on the data itself
  double low = 0;
  double high = 0;
  double confidence = 0;
  size_t resamples = 0;
  /// Two-sided bootstrap p-value of "ratio = 1": 2·(k + 1)/(B + 1), capped at 1, where k counts
  /// the resampled ratios on the far side of 1 from the estimate (ties half). The +1 keeps it
  /// off zero (Davison & Hinkley's convention); it lies below 1 − confidence about when the
  /// interval excludes 1.
  double p_value = 1;
};

/// Percentile bootstrap of percentile(B, q) / percentile(A, q): each resample draws n_a values
/// from A and n_b from B with replacement (independently: the runs are not paired), and the
/// interval is the ((1-c)/2, (1+c)/2) percentiles of the resampled ratios (type 7, as
/// percentile()). The percentile method needs no variance formula for a ratio of quantiles, and
/// the interval is invariant under monotone transforms, so it is the same whether one reads
/// ratios or their logs. Meant for positive quantities (throughput, times). Nullopt when the
/// ratio is undefined: a side is empty, or A's percentile is 0 in the data or in any resample
/// (only possible when A contains zeros).
std::optional<ConfidenceInterval> bootstrap_ratio(std::span<const double> a, std::span<const double> b, double q,
                                                  const BootstrapOptions& options);

/// bootstrap_ratio of the medians (q = 50).
std::optional<ConfidenceInterval> bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                                         const BootstrapOptions& options);

// ---------------------------------------------------------------------------------------------
// Run-level statistics: a handful of values, one per run, judged against run-to-run noise.

/// Student's t distribution: P(T ≤ t) for `df` > 0 degrees of freedom (df need not be an
/// integer: robust scale estimates have effective, fractional degrees of freedom). Through the
/// regularized incomplete beta function, accurate to about 1e-12.
double student_t_cdf(double t, double df);

/// The p-quantile of Student's t with `df` degrees of freedom, p in (0, 1): the inverse of
/// student_t_cdf by bisection (to 1e-10 in t).
double student_t_quantile(double p, double df);

/// Hodges–Lehmann estimate of the shift from A to B: the median of the n_a·n_b differences
/// b_j − a_i. Robust (one wild run moves it little) and, for normal data, 95 % as efficient as the
/// difference of means. For one value a side it is b − a. Both sides must be non-empty.
double hodges_lehmann_shift(std::span<const double> a, std::span<const double> b);

/// The Shamos scale estimate pooled over groups: 1.0483 · median{|x_i − x_j| : i < j in the same
/// group}, a consistent estimate of the standard deviation for normal data (a difference of two
/// values has standard deviation √2·σ, and the median of |N(0, 2σ²)| is 0.6745·√2·σ). Each
/// group may have its own centre (runs of different configurations or sessions), only the spread
/// is shared. Breakdown point 29 %, efficiency 86 % (Shamos 1976; Rousseeuw & Croux 1993), far
/// above the MAD's 37 %: with five runs a side every run counts. Nullopt when no group has two
/// values.
std::optional<double> pooled_shamos_scale(std::span<const std::vector<double>> groups);

/// A one-step Huber M-estimate of scale pooled over groups: with s₀ the pooled Shamos estimate and
/// r the residuals from each group's median, s² = Σ min(r², (2.5·s₀)²) / (β·(N − G)), where
/// β = E[min(Z², 2.5²)] = 0.97756 makes it consistent for normal data (N values in G groups).
/// Nearly as efficient as the standard deviation (for groups of 2 to 20 it spreads like a χ² with
/// about 0.9·(N − G) degrees of freedom, and errs high rather than low), while one wild run moves
/// it by a bounded amount: its residual counts as 2.5·s₀ at most. One step, not iterated to the
/// fixed point: with a handful of runs that fixed point does not exist once one run is wild
/// (2.5² > β·(N − G)), and the iteration would follow the outlier. Nullopt when no group has two
/// values.
std::optional<double> pooled_huber_scale(std::span<const std::vector<double>> groups);

/// The standard normal quantile (inverse of Φ), p in (0, 1).
double normal_quantile(double p);

// ---------------------------------------------------------------------------------------------
// Multiple comparisons.

/// Holm–Bonferroni adjusted p-values, in the input order: with the m p-values sorted ascending,
/// p_adj(i) = max over j ≤ i of min(1, (m − j + 1)·p(j)) (1-based). Reject metric i at level alpha
/// exactly when p_adj(i) ≤ alpha. Monotone: a smaller raw p-value never gets a larger adjusted
/// one. Each p-value must lie in [0, 1] (EXPCTL_ASSERT).
std::vector<double> holm_adjust(std::span<const double> p_values);

/// The level each raw p-value had to meet in Holm's step-down at family-wise level `alpha`, in
/// the input order: alpha / (m − r + 1) for the r-th smallest (alpha/m for the smallest, alpha for
/// the largest). What a report prints beside a p-value ("p = 0.0044 > 0.0033, Holm over 3
/// metrics"). A raw p at or below its level is significant unless a smaller one failed first,
/// which holm_adjust's value then shows.
std::vector<double> holm_levels(std::span<const double> p_values, double alpha);

// ---------------------------------------------------------------------------------------------
// Paired differences: one value per pair, e.g. repeat i of A and of B both run with seed i.

/// A paired t test of "the mean difference is 0", with its confidence interval.
struct PairedTest {
  size_t pairs = 0;
  double mean = 0;            ///< mean difference (B − A on the caller's scale)
  double standard_error = 0;  ///< sd of the differences / √pairs
  double df = 0;              ///< pairs − 1
  double t = 0;               ///< mean / standard_error (±inf when every difference is the same non-zero value)
  double p_value = 1;         ///< two-sided
  double low = 0;             ///< the confidence interval of the mean difference
  double high = 0;
  double confidence = 0.95;
};

/// Student's paired t test over `differences` (at least two, all finite: EXPCTL_ASSERT). Pairing
/// removes what both runs of a pair share (the seed's luck: initialisation and data order), so
/// a 1 % change is found across five seeds whose final losses differ by several percent. The
/// differences of deterministic runs are close to normal; t is what makes five pairs enough (a
/// signed-rank test cannot go below p = 2/2⁵ = 0.0625 with five pairs).
PairedTest paired_t_test(std::span<const double> differences, double confidence = 0.95);

// ---------------------------------------------------------------------------------------------
// Loss curves.

/// How two loss curves relate. Indices are positions in the sequences as given; the caller maps
/// them to step numbers.
struct CurveComparison {
  /// Same length and every float32 bit pattern equal (so 0.0 vs -0.0 differ, and NaN equals a
  /// NaN with the same payload): the standard for "a rerun reproduced the run".
  bool identical = false;
  size_t length_a = 0;
  size_t length_b = 0;
  /// First index whose bit patterns differ, or min(length) when one curve is a strict prefix of
  /// the other; nullopt when identical.
  std::optional<size_t> first_divergence;
  /// Largest |a[i] − b[i]| over the common prefix (computed in double); +inf where exactly one
  /// side is NaN or the values are different infinities; NaN against NaN counts as 0, and so does
  /// 0.0 against -0.0 (they differ in bits only). 0 when identical.
  double max_abs_difference = 0;
  /// Index of that largest difference (the first such index on a tie); nullopt when no bit
  /// pattern differs within the common prefix.
  std::optional<size_t> max_difference_index;
};

/// Compares two loss curves bit for bit.
CurveComparison compare_curves(std::span<const float> a, std::span<const float> b);

}  // namespace expctl::compare
