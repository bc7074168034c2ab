#include "expctl/compare/statistics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>

#include "expctl/util/error.hpp"

namespace expctl::compare {

namespace {

// Type-7 percentile of already sorted values (see percentile() in the header).
double sorted_percentile(std::span<const double> sorted, double q) {
  EXPCTL_ASSERT(!sorted.empty(), "percentile of no values");
  EXPCTL_ASSERT(q >= 0 && q <= 100, "percentile {} outside [0, 100]", q);
  const double h = static_cast<double>(sorted.size() - 1) * q / 100.0;
  const auto low = static_cast<size_t>(std::floor(h));
  if (low + 1 >= sorted.size()) {
    return sorted.back();
  }
  return sorted[low] + (h - static_cast<double>(low)) * (sorted[low + 1] - sorted[low]);
}

std::vector<double> sorted_copy(std::span<const double> values) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

// Type-7 percentile by partial selection: the bootstrap takes thousands of them, and
// nth_element is linear where a sort is n log n. Same value as sorted_percentile().
double percentile_in_place(std::vector<double>& values, double q) {
  const double h = static_cast<double>(values.size() - 1) * q / 100.0;
  const auto low = static_cast<size_t>(std::floor(h));
  const auto low_it = values.begin() + static_cast<std::ptrdiff_t>(low);
  std::nth_element(values.begin(), low_it, values.end());
  const double lower = *low_it;
  if (low + 1 >= values.size()) {
    return lower;
  }
  // After nth_element everything past `low` is >= lower, so its minimum is the next rank.
  const double upper = *std::min_element(low_it + 1, values.end());
  return lower + (h - static_cast<double>(low)) * (upper - lower);
}

void assert_finite(std::span<const double> values) {
  for (const double value : values) {
    EXPCTL_ASSERT(std::isfinite(value), "non-finite sample {} passed to the U test", value);
  }
}

// Mid-ranks (1-based) of the pooled sample, the sum of A's ranks, and the tie term Σ(t³ − t)
// over groups of t equal values, which shrinks the variance of U.
struct RankSums {
  double rank_sum_a = 0;
  double tie_term = 0;
  bool has_ties = false;
};

RankSums rank_pooled(std::span<const double> a, std::span<const double> b) {
  struct Item {
    double value;
    bool from_a;
  };
  std::vector<Item> pooled;
  pooled.reserve(a.size() + b.size());
  for (const double value : a) pooled.push_back({value, true});
  for (const double value : b) pooled.push_back({value, false});
  std::sort(pooled.begin(), pooled.end(), [](const Item& x, const Item& y) { return x.value < y.value; });

  RankSums sums;
  for (size_t begin = 0; begin < pooled.size();) {
    size_t end = begin + 1;
    while (end < pooled.size() && pooled[end].value == pooled[begin].value) ++end;
    // Positions begin..end-1 share the mean of ranks begin+1..end.
    const double mid_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2.0;
    const auto tied = static_cast<double>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      if (pooled[i].from_a)
        sums.rank_sum_a += mid_rank;
    }
    sums.tie_term += tied * tied * tied - tied;
    sums.has_ties = sums.has_ties || end - begin > 1;
    begin = end;
  }
  return sums;
}

// Null distribution of U for m and n values without ties, as counts of the C(m+n, m) equally
// likely arrangements. Recurrence on the largest value: if it belongs to the first sample it
// beats all n of the other (adds n to U), otherwise it adds nothing:
//   f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u),   f(0, n, 0) = f(m, 0, 0) = 1.
std::vector<uint64_t> u_counts(size_t m, size_t n) {
  std::vector<std::vector<std::vector<uint64_t>>> f(m + 1, std::vector<std::vector<uint64_t>>(n + 1));
  for (size_t i = 0; i <= m; ++i) {
    for (size_t j = 0; j <= n; ++j) {
      if (i == 0 || j == 0) {
        f[i][j] = {1};
        continue;
      }
      std::vector<uint64_t>& counts = f[i][j];
      counts.assign(i * j + 1, 0);
      const std::vector<uint64_t>& largest_first = f[i - 1][j];
      for (size_t u = 0; u < largest_first.size(); ++u) counts[u + j] += largest_first[u];
      const std::vector<uint64_t>& largest_second = f[i][j - 1];
      for (size_t u = 0; u < largest_second.size(); ++u) counts[u] += largest_second[u];
    }
  }
  return f[m][n];
}

double normal_two_sided_p(double z) {
  // 2·(1 − Φ(|z|)) = erfc(|z|/√2); erfc keeps full relative precision deep in the tail.
  return std::min(1.0, std::erfc(std::fabs(z) / std::sqrt(2.0)));
}

// Draws uniform indices in [0, n) from mt19937_64 by rejection. std::uniform_int_distribution
// is not specified by the standard, so libstdc++ and libc++ would give different intervals for
// the same seed; this keeps results reproducible across compilers.
class IndexSampler {
 public:
  explicit IndexSampler(uint64_t seed) : m_engine(seed) {}

  size_t draw(size_t n) {
    const auto bound = static_cast<uint64_t>(n);
    // 2^64 mod n: rejecting values below it leaves a range that is an exact multiple of n.
    const uint64_t threshold = (0 - bound) % bound;
    uint64_t x = m_engine();
    while (x < threshold) x = m_engine();
    return static_cast<size_t>(x % bound);
  }

 private:
  std::mt19937_64 m_engine;
};

void resample(std::span<const double> values, IndexSampler& sampler, std::vector<double>& out) {
  out.resize(values.size());
  for (double& value : out) value = values[sampler.draw(values.size())];
}

// Share of sorted resampled ratios on the far side of 1 from the estimate, as a two-sided
// p-value (see ConfidenceInterval::p_value).
double bootstrap_p_value(std::span<const double> sorted_ratios, double estimate) {
  const auto below =
      static_cast<double>(std::lower_bound(sorted_ratios.begin(), sorted_ratios.end(), 1.0) - sorted_ratios.begin());
  const auto not_above =
      static_cast<double>(std::upper_bound(sorted_ratios.begin(), sorted_ratios.end(), 1.0) - sorted_ratios.begin());
  const auto total = static_cast<double>(sorted_ratios.size());
  const double ties = not_above - below;
  const double far_side = estimate >= 1 ? below + ties / 2 : (total - not_above) + ties / 2;
  return std::min(1.0, 2 * (far_side + 1) / (total + 1));
}

// Continued fraction of the regularized incomplete beta function (modified Lentz), valid
// for x < (a + 1) / (a + b + 2); see Numerical Recipes §6.4.
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  double c = 1;
  double d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    const double m2 = 2.0 * m;
    for (const double term :
         {m * (b - m) * x / ((a + m2 - 1) * (a + m2)), -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))}) {
      d = 1 + term * d;
      d = 1 / (std::fabs(d) < tiny ? tiny : d);
      c = 1 + term / c;
      c = std::fabs(c) < tiny ? tiny : c;
      h *= d * c;
    }
    if (std::fabs(d * c - 1) < 1e-15) {
      break;
    }
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0 || x >= 1) {
    return x <= 0 ? 0.0 : 1.0;
  }
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) {
    return front * beta_fraction(a, b, x) / a;
  }
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

// Inverts the monotone `cdf` at p by bisection between -limit and limit, growing the limit first.
template <typename Cdf>
double invert_cdf(Cdf cdf, double p) {
  double high = 1;
  while (cdf(high) < p && high < 1e12) high *= 2;
  double low = -1;
  while (cdf(low) > p && low > -1e12) low *= 2;
  for (int i = 0; i < 200 && high - low > 1e-10 * std::max(1.0, std::fabs(low)); ++i) {
    const double middle = (low + high) / 2;
    (cdf(middle) < p ? low : high) = middle;
  }
  return (low + high) / 2;
}

}  // namespace

double student_t_cdf(double t, double df) {
  EXPCTL_ASSERT(df > 0, "t distribution with {} degrees of freedom", df);
  if (std::isinf(t)) {
    return t > 0 ? 1.0 : 0.0;
  }
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  EXPCTL_ASSERT(p > 0 && p < 1, "t quantile of probability {}", p);
  EXPCTL_ASSERT(df > 0, "t distribution with {} degrees of freedom", df);
  // Newton from the Cornish–Fisher start (a few steps for any df ≥ 1), bisection when it strays.
  const double z = normal_quantile(p);
  double t = z + (z * z * z + z) / (4 * df) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * df * df);
  const double log_norm = std::lgamma((df + 1) / 2) - std::lgamma(df / 2) - 0.5 * std::log(df * std::numbers::pi);
  for (int i = 0; i < 30 && std::isfinite(t); ++i) {
    const double density = std::exp(log_norm - (df + 1) / 2 * std::log1p(t * t / df));
    const double step = (student_t_cdf(t, df) - p) / density;
    t -= step;
    if (std::fabs(step) < 1e-12 * std::max(1.0, std::fabs(t))) {
      return t;
    }
  }
  return invert_cdf([df](double x) { return student_t_cdf(x, df); }, p);
}

double normal_quantile(double p) {
  EXPCTL_ASSERT(p > 0 && p < 1, "normal quantile of probability {}", p);
  // Acklam's rational approximation (relative error < 1.2e-9), then one Halley step on erfc.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  const double q = std::min(p, 1 - p);
  double x = 0;
  if (q < 0.02425) {
    const double r = std::sqrt(-2 * std::log(q));
    x = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) /
        ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1);
    x = p < 0.5 ? x : -x;
  } else {
    const double r = (p - 0.5) * (p - 0.5);
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (p - 0.5) /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double error = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = error * std::sqrt(2 * std::numbers::pi) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double hodges_lehmann_shift(std::span<const double> a, std::span<const double> b) {
  EXPCTL_ASSERT(!a.empty() && !b.empty(), "shift of an empty side ({} vs {} values)", a.size(), b.size());
  std::vector<double> differences;
  differences.reserve(a.size() * b.size());
  for (const double x : a) {
    for (const double y : b) differences.push_back(y - x);
  }
  return percentile_in_place(differences, 50);
}

std::optional<double> pooled_shamos_scale(std::span<const std::vector<double>> groups) {
  std::vector<double> distances;
  for (const auto& group : groups) {
    for (size_t i = 0; i < group.size(); ++i) {
      for (size_t j = i + 1; j < group.size(); ++j) distances.push_back(std::fabs(group[i] - group[j]));
    }
  }
  if (distances.empty()) {
    return std::nullopt;
  }
  // 1 / (√2 · Φ⁻¹(3/4)): the median of |N(0, 2σ²)| is 0.6745·√2·σ.
  constexpr double consistency = 1.0483;
  return consistency * percentile_in_place(distances, 50);
}

namespace {

// Residuals of each group of two or more values from its median, and how many groups gave some.
std::pair<std::vector<double>, size_t> median_residuals(std::span<const std::vector<double>> groups) {
  std::vector<double> residuals;
  size_t count = 0;
  for (const auto& group : groups) {
    if (group.size() < 2) {
      continue;
    }
    const double centre = median(group);
    for (const double value : group) residuals.push_back(value - centre);
    ++count;
  }
  return {residuals, count};
}

// Huber's scale step from scale s: residuals winsorized at ±2.5·s.
double huber_step(std::span<const double> residuals, double s, double dof) {
  constexpr double c = 2.5;
  constexpr double beta = 0.97756;  // E[min(Z², c²)] = (2Φ(c) − 1) − 2cφ(c) + 2c²(1 − Φ(c))
  double sum = 0;
  for (const double r : residuals) sum += std::min(r * r, c * c * s * s);
  return std::sqrt(sum / (beta * dof));
}

}  // namespace

std::optional<double> pooled_huber_scale(std::span<const std::vector<double>> groups) {
  const auto [residuals, count] = median_residuals(groups);
  if (count == 0) {
    return std::nullopt;
  }
  const double dof = static_cast<double>(residuals.size() - count);
  const double start = pooled_shamos_scale(groups).value_or(0);
  // Ties everywhere (a zero start) leave nothing to clip against: the plain deviation.
  return huber_step(residuals, start > 0 ? start : INFINITY, dof);
}

double mean(std::span<const double> values) {
  EXPCTL_ASSERT(!values.empty(), "mean of no values");
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(std::span<const double> values) {
  EXPCTL_ASSERT(!values.empty(), "standard deviation of no values");
  if (values.size() < 2) {
    return 0;
  }
  // Two passes (mean first) avoid the cancellation of the Σx² − n·mean² shortcut, which loses
  // every digit for throughputs around 1e4 with 1 % noise.
  const double m = mean(values);
  double squares = 0;
  for (const double value : values) squares += (value - m) * (value - m);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

double percentile(std::span<const double> values, double q) {
  EXPCTL_ASSERT(!values.empty(), "percentile of no values");
  EXPCTL_ASSERT(q >= 0 && q <= 100, "percentile {} outside [0, 100]", q);
  // The selection path the bootstrap uses, so the percentile tests cover it too.
  std::vector<double> copy(values.begin(), values.end());
  return percentile_in_place(copy, q);
}

double median(std::span<const double> values) {
  return percentile(values, 50);
}

Summary summarize(std::span<const double> values) {
  const std::vector<double> sorted = sorted_copy(values);
  Summary summary;
  summary.count = values.size();
  summary.mean = mean(values);
  summary.stddev = stddev(values);
  summary.min = sorted.front();
  summary.p50 = sorted_percentile(sorted, 50);
  summary.p95 = sorted_percentile(sorted, 95);
  summary.max = sorted.back();
  return summary;
}

std::string_view to_string(PValueMethod method) {
  return method == PValueMethod::exact ? "exact" : "normal";
}

double exact_u_cdf(size_t n_a, size_t n_b, double u) {
  EXPCTL_ASSERT(n_a <= k_exact_max_per_side && n_b <= k_exact_max_per_side,
                "exact U distribution asked for {} x {} samples", n_a, n_b);
  if (u < 0) {
    return 0;
  }
  const std::vector<uint64_t> counts = u_counts(n_a, n_b);
  const auto last = std::min(counts.size() - 1, static_cast<size_t>(std::floor(u)));
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  const uint64_t below =
      std::accumulate(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(last) + 1, uint64_t{0});
  return static_cast<double>(below) / static_cast<double>(total);
}

MannWhitneyResult mann_whitney_u(std::span<const double> a, std::span<const double> b) {
  EXPCTL_ASSERT(!a.empty() && !b.empty(), "U test with an empty side ({} vs {} values)", a.size(), b.size());
  assert_finite(a);
  assert_finite(b);
  const auto n_a = static_cast<double>(a.size());
  const auto n_b = static_cast<double>(b.size());
  const double pairs = n_a * n_b;
  const RankSums sums = rank_pooled(a, b);

  MannWhitneyResult result;
  result.n_a = a.size();
  result.n_b = b.size();
  result.u_a = sums.rank_sum_a - n_a * (n_a + 1) / 2;
  const double u_b = pairs - result.u_a;
  result.common_language = u_b / pairs;
  result.rank_biserial = 2 * result.common_language - 1;

  const double n = n_a + n_b;
  const double variance = pairs / 12.0 * ((n + 1) - sums.tie_term / (n * (n - 1)));
  if (variance > 0) {
    const double distance = u_b - pairs / 2;
    // Continuity correction: U moves in steps of 1 (½ with ties), so shrink the distance to
    // the mean by ½ before comparing with the continuous normal, never past zero.
    const double corrected = std::copysign(std::max(std::fabs(distance) - 0.5, 0.0), distance);
    result.z = corrected / std::sqrt(variance);
  }

  const bool exact = !sums.has_ties && a.size() <= k_exact_max_per_side && b.size() <= k_exact_max_per_side;
  if (exact) {
    result.method = PValueMethod::exact;
    // The null distribution is symmetric about n_a·n_b/2, so the two-sided p-value doubles
    // the tail beyond the smaller of the two statistics.
    result.p_value = std::min(1.0, 2 * exact_u_cdf(a.size(), b.size(), std::min(result.u_a, u_b)));
  } else {
    result.method = PValueMethod::normal;
    result.p_value = variance > 0 ? normal_two_sided_p(result.z) : 1.0;
  }
  return result;
}

std::optional<ConfidenceInterval> bootstrap_ratio(std::span<const double> a, std::span<const double> b, double q,
                                                  const BootstrapOptions& options) {
  EXPCTL_ASSERT(options.resamples > 0, "bootstrap with no resamples");
  EXPCTL_ASSERT(options.confidence > 0 && options.confidence < 1, "confidence {} outside (0, 1)", options.confidence);
  if (a.empty() || b.empty()) {
    return std::nullopt;
  }
  const double base = percentile(a, q);
  if (base == 0) {
    return std::nullopt;
  }

  IndexSampler sampler(options.seed);
  std::vector<double> draw_a;
  std::vector<double> draw_b;
  std::vector<double> ratios;
  ratios.reserve(options.resamples);
  for (size_t i = 0; i < options.resamples; ++i) {
    resample(a, sampler, draw_a);
    resample(b, sampler, draw_b);
    const double resampled_base = percentile_in_place(draw_a, q);
    if (resampled_base == 0) {
      return std::nullopt;
    }
    ratios.push_back(percentile_in_place(draw_b, q) / resampled_base);
  }
  std::sort(ratios.begin(), ratios.end());

  const double tail = (1 - options.confidence) / 2;
  ConfidenceInterval interval;
  interval.estimate = percentile(b, q) / base;
  interval.low = sorted_percentile(ratios, 100 * tail);
  interval.high = sorted_percentile(ratios, 100 * (1 - tail));
  interval.confidence = options.confidence;
  interval.resamples = options.resamples;
  interval.p_value = bootstrap_p_value(ratios, interval.estimate);
  return interval;
}

std::optional<ConfidenceInterval> bootstrap_median_ratio(std::span<const double> a, std::span<const double> b,
                                                         const BootstrapOptions& options) {
  return bootstrap_ratio(a, b, 50, options);
}

std::vector<double> holm_adjust(std::span<const double> p_values) {
  for (const double p : p_values) {
    EXPCTL_ASSERT(p >= 0 && p <= 1, "p-value {} outside [0, 1]", p);
  }
  std::vector<size_t> order(p_values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p_values[x] < p_values[y]; });

  std::vector<double> adjusted(p_values.size());
  const size_t m = p_values.size();
  double running_max = 0;
  for (size_t rank = 0; rank < m; ++rank) {
    const size_t index = order[rank];
    const double scaled = std::min(1.0, static_cast<double>(m - rank) * p_values[index]);
    // The running maximum makes the adjusted values monotone in the raw ones: Holm's step-down
    // stops at the first non-rejection, so nothing after it may look more significant.
    running_max = std::max(running_max, scaled);
    adjusted[index] = running_max;
  }
  return adjusted;
}

std::vector<double> holm_levels(std::span<const double> p_values, double alpha) {
  std::vector<size_t> order(p_values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p_values[x] < p_values[y]; });
  std::vector<double> levels(p_values.size());
  for (size_t rank = 0; rank < order.size(); ++rank) {
    levels[order[rank]] = alpha / static_cast<double>(order.size() - rank);
  }
  return levels;
}

PairedTest paired_t_test(std::span<const double> differences, double confidence) {
  EXPCTL_ASSERT(differences.size() >= 2, "paired t test of {} pairs", differences.size());
  assert_finite(differences);
  PairedTest test;
  test.pairs = differences.size();
  test.confidence = confidence;
  test.df = static_cast<double>(test.pairs - 1);
  test.mean = mean(differences);
  test.standard_error = stddev(differences) / std::sqrt(static_cast<double>(test.pairs));
  if (test.standard_error > 0) {
    test.t = test.mean / test.standard_error;
    test.p_value = std::min(1.0, 2 * student_t_cdf(-std::fabs(test.t), test.df));
  } else {
    // Every pair moved by exactly the same amount: no spread to test against. Zero is no change;
    // anything else is as certain as the data can make it.
    test.t = test.mean == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), test.mean);
    test.p_value = test.mean == 0 ? 1.0 : 0.0;
  }
  const double half = student_t_quantile(0.5 + confidence / 2, test.df) * test.standard_error;
  test.low = test.mean - half;
  test.high = test.mean + half;
  return test;
}

CurveComparison compare_curves(std::span<const float> a, std::span<const float> b) {
  CurveComparison result;
  result.length_a = a.size();
  result.length_b = b.size();
  const size_t common = std::min(a.size(), b.size());
  for (size_t i = 0; i < common; ++i) {
    if (std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i])) {
      continue;
    }
    if (!result.first_divergence)
      result.first_divergence = i;
    const double x = a[i];
    const double y = b[i];
    // Differing bits with both NaN (another payload) is no numeric difference; NaN against a
    // number is the largest difference there is. Infinities fall out of fabs by themselves.
    double difference = std::fabs(x - y);
    if (std::isnan(x) || std::isnan(y)) {
      difference = std::isnan(x) && std::isnan(y) ? 0 : std::numeric_limits<double>::infinity();
    }
    if (!result.max_difference_index || difference > result.max_abs_difference) {
      result.max_abs_difference = difference;
      result.max_difference_index = i;
    }
  }
  if (!result.first_divergence && a.size() != b.size()) {
    result.first_divergence = common;
  }
  result.identical = !result.first_divergence;
  return result;
}

}  // namespace expctl::compare
