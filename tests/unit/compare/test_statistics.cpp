#include <cmath>
#include <limits>
#include <vector>

#include "noise.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/statistics.hpp"
#include "expctl/util/error.hpp"

using namespace expctl::compare;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using expctl::compare::testing::Noise;

// Reference values: scipy is not installed here, so every expected number below comes from a
// published example or a hand computation written next to it. The exact U distribution was
// also cross-checked once against an independent Python computation with big integers (the
// Gaussian binomial coefficient [m+n choose m]_q, whose q^u coefficient counts arrangements
// with U = u), which reproduced the classic critical-value table used below.

TEST_CASE("statistics: mean and sample standard deviation") {
  const std::vector<double> values{2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(mean(values) == 5.0);
  // Σ(x − 5)² = 9+1+1+1+0+0+4+16 = 32; sample variance 32/7.
  CHECK_THAT(stddev(values), WithinRel(std::sqrt(32.0 / 7.0), 1e-15));
  CHECK(stddev(std::vector<double>{42}) == 0.0);
  CHECK_THROWS_AS(mean(std::vector<double>{}), expctl::util::InternalError);
}

TEST_CASE("statistics: percentiles interpolate linearly between closest ranks (type 7)") {
  // numpy.percentile([1, 2, 3, 4], 95) = 3.85: h = 3 · 0.95 = 2.85 → 3 + 0.85 · (4 − 3).
  CHECK_THAT(percentile(std::vector<double>{4, 1, 3, 2}, 95), WithinRel(3.85, 1e-12));
  CHECK(median(std::vector<double>{4, 1, 3, 2}) == 2.5);
  CHECK(median(std::vector<double>{3, 1, 2}) == 2.0);
  // h = 4 · 0.40 = 1.6 → 20 + 0.6 · (35 − 20) = 29 (the textbook example for type 7).
  CHECK_THAT(percentile(std::vector<double>{15, 20, 35, 40, 50}, 40), WithinRel(29.0, 1e-12));
  CHECK(percentile(std::vector<double>{15, 20, 35, 40, 50}, 0) == 15.0);
  CHECK(percentile(std::vector<double>{15, 20, 35, 40, 50}, 100) == 50.0);
  CHECK(percentile(std::vector<double>{7}, 95) == 7.0);
  CHECK_THROWS_AS(percentile(std::vector<double>{1, 2}, 101), expctl::util::InternalError);
}

TEST_CASE("statistics: summarize agrees with the single helpers") {
  const std::vector<double> values = Noise(7).samples(101, 1000, 0.02);
  const Summary summary = summarize(values);
  CHECK(summary.count == 101);
  CHECK(summary.mean == mean(values));
  CHECK(summary.stddev == stddev(values));
  CHECK(summary.p50 == median(values));
  CHECK(summary.p95 == percentile(values, 95));
  CHECK(summary.min <= summary.p50);
  CHECK(summary.p95 <= summary.max);
}

TEST_CASE("mann-whitney: scipy's documented example (Conover), exact p-value") {
  // scipy.stats.mannwhitneyu docs: males vs females, U1 = 17, exact two-sided p = 0.1111.
  const std::vector<double> males{19, 22, 16, 29, 24};
  const std::vector<double> females{20, 11, 17, 12};
  const MannWhitneyResult result = mann_whitney_u(males, females);
  CHECK(result.method == PValueMethod::exact);
  CHECK(result.u_a == 17.0);
  CHECK_THAT(result.p_value, WithinRel(1.0 / 9.0, 1e-12));
  // U of B = 20 − 17 = 3 of 20 pairs: females are above males in 15 % of the pairs.
  CHECK_THAT(result.common_language, WithinRel(0.15, 1e-12));
  CHECK_THAT(result.rank_biserial, WithinRel(-0.7, 1e-12));
  // (3 − 10 + 0.5) / sqrt(4·5·10/12): the continuity-corrected z scipy's asymptotic method uses.
  CHECK_THAT(result.z, WithinRel(-1.5921683328090657, 1e-12));
}

TEST_CASE("mann-whitney: exact distribution reproduces the critical-value table") {
  // Two-sided alpha = 0.05 critical values of U for n per side (any statistics textbook table):
  // the test rejects at U ≤ critical and not at critical + 1.
  const std::vector<std::pair<size_t, double>> table{{5, 2},   {6, 5},   {7, 8},    {8, 13},  {9, 17},  {10, 23},
                                                     {11, 30}, {12, 37}, {13, 45},  {14, 55}, {15, 64}, {16, 75},
                                                     {17, 87}, {18, 99}, {19, 113}, {20, 127}};
  for (const auto& [n, critical] : table) {
    CAPTURE(n);
    CHECK(2 * exact_u_cdf(n, n, critical) <= 0.05);
    CHECK(2 * exact_u_cdf(n, n, critical + 1) > 0.05);
  }
  // n = 4: even U = 0 gives 2/70; n = 3: never below 0.1 = 2/20.
  CHECK_THAT(2 * exact_u_cdf(4, 4, 0), WithinRel(2.0 / 70.0, 1e-12));
  CHECK_THAT(2 * exact_u_cdf(3, 3, 0), WithinRel(0.1, 1e-12));
  CHECK(exact_u_cdf(6, 7, 42) == 1.0);
  CHECK(exact_u_cdf(6, 7, -1) == 0.0);
}

TEST_CASE("mann-whitney: complete separation gives the smallest exact p-value") {
  const std::vector<double> a{6, 7, 8, 9, 10};
  const std::vector<double> b{1, 2, 3, 4, 5};
  const MannWhitneyResult result = mann_whitney_u(a, b);
  CHECK(result.method == PValueMethod::exact);
  CHECK(result.u_a == 25.0);
  CHECK_THAT(result.p_value, WithinRel(2.0 / 252.0, 1e-12));  // 2 / C(10, 5)
  CHECK(result.common_language == 0.0);
  CHECK(result.rank_biserial == -1.0);
  CHECK(result.z < 0);
}

TEST_CASE("mann-whitney: ties use mid-ranks and the tie-corrected normal approximation") {
  // A = 5 1 4 3 5, B = 2 4 7 -1 0 4. Mid-ranks of the pooled 11 values: -1→1, 0→2, 1→3, 2→4,
  // 3→5, 4,4,4→7, 5,5→9.5, 7→11; R_A = 9.5+3+7+5+9.5 = 34, U_A = 34 − 15 = 19, U_B = 11.
  // Tie term Σ(t³−t) = 24 + 6 = 30; var = 30/12 · (12 − 30/110) = 29.318; z = (11 − 15 + 0.5)/√var.
  // DolphinDB's mannWhitneyUTest documents the same data with two-sided p = 0.518023.
  const std::vector<double> a{5, 1, 4, 3, 5};
  const std::vector<double> b{2, 4, 7, -1, 0, 4};
  const MannWhitneyResult result = mann_whitney_u(a, b);
  CHECK(result.method == PValueMethod::normal);
  CHECK(result.u_a == 19.0);
  const double variance = 30.0 / 12.0 * (12.0 - 30.0 / 110.0);
  CHECK_THAT(result.z, WithinRel(-3.5 / std::sqrt(variance), 1e-12));
  CHECK_THAT(result.p_value, WithinAbs(0.518023, 2e-6));
}

TEST_CASE("mann-whitney: identical samples give p = 1 and no effect") {
  const std::vector<double> values = Noise(11).samples(30, 500, 0.02);
  const MannWhitneyResult result = mann_whitney_u(values, values);
  CHECK(result.p_value == 1.0);
  CHECK(result.z == 0.0);
  CHECK(result.rank_biserial == 0.0);

  const std::vector<double> constant(8, 3.0);
  const MannWhitneyResult tied = mann_whitney_u(constant, constant);
  CHECK(tied.p_value == 1.0);
  CHECK(tied.method == PValueMethod::normal);
}

TEST_CASE("mann-whitney: swapping the sides mirrors the result") {
  Noise noise(3);
  for (const size_t n : {6, 12, 40}) {  // exact and normal regimes
    CAPTURE(n);
    const std::vector<double> a = noise.samples(n, 100, 0.05);
    const std::vector<double> b = noise.samples(n + 3, 103, 0.05);
    const MannWhitneyResult forward = mann_whitney_u(a, b);
    const MannWhitneyResult backward = mann_whitney_u(b, a);
    CHECK_THAT(forward.p_value, WithinRel(backward.p_value, 1e-12));
    CHECK(forward.u_a + backward.u_a == static_cast<double>(a.size() * b.size()));
    CHECK_THAT(forward.rank_biserial, WithinAbs(-backward.rank_biserial, 1e-12));
    CHECK_THAT(forward.z, WithinAbs(-backward.z, 1e-12));
  }
}

TEST_CASE("mann-whitney: clearly separated large samples give a tiny p-value") {
  Noise noise(5);
  const std::vector<double> a = noise.samples(30, 1000, 0.01);
  const std::vector<double> b = noise.samples(30, 800, 0.01);
  const MannWhitneyResult result = mann_whitney_u(a, b);
  CHECK(result.method == PValueMethod::normal);
  CHECK(result.p_value < 1e-9);
  CHECK(result.rank_biserial == -1.0);
}

TEST_CASE("bootstrap: the interval of the median ratio covers a known shift") {
  Noise noise(2024);
  const std::vector<double> a = noise.samples(30, 1000, 0.02);
  const std::vector<double> b = noise.samples(30, 900, 0.02);
  const std::optional<ConfidenceInterval> interval = bootstrap_median_ratio(a, b, {.resamples = 2000, .seed = 42});
  REQUIRE(interval.has_value());
  CHECK(interval->low < 0.9);
  CHECK(interval->high > 0.9);
  CHECK(interval->high < 1.0);
  CHECK(interval->low <= interval->estimate);
  CHECK(interval->estimate <= interval->high);
  CHECK(interval->estimate == median(b) / median(a));
  CHECK(interval->resamples == 2000);
  CHECK(interval->confidence == 0.95);
}

TEST_CASE("bootstrap: the same seed gives the same interval, another seed another") {
  Noise noise(8);
  const std::vector<double> a = noise.samples(25, 50, 0.05);
  const std::vector<double> b = noise.samples(25, 52, 0.05);
  const auto first = bootstrap_median_ratio(a, b, {.seed = 1});
  const auto again = bootstrap_median_ratio(a, b, {.seed = 1});
  const auto other = bootstrap_median_ratio(a, b, {.seed = 2});
  REQUIRE((first && again && other));
  CHECK(first->low == again->low);
  CHECK(first->high == again->high);
  CHECK((first->low != other->low || first->high != other->high));
}

TEST_CASE("bootstrap: p-value is tiny for a clear shift and large for none") {
  Noise noise(2025);
  const std::vector<double> a = noise.samples(40, 1000, 0.02);
  const auto shifted = bootstrap_median_ratio(a, noise.samples(40, 900, 0.02), {.seed = 3});
  const auto same = bootstrap_median_ratio(a, noise.samples(40, 1000, 0.02), {.seed = 3});
  REQUIRE((shifted && same));
  // No resampled ratio reaches 1, so k = 0 and p is the floor 2/(B + 1).
  CHECK_THAT(shifted->p_value, WithinRel(2.0 / 2001.0, 1e-12));
  CHECK(same->p_value > 0.05);
  CHECK(same->low < 1.0);
  CHECK(same->high > 1.0);
}

TEST_CASE("bootstrap: other percentiles use the same interpolation") {
  Noise noise(6);
  const std::vector<double> a = noise.samples(60, 10, 0.1);
  const std::vector<double> b = noise.samples(60, 12, 0.1);
  const auto tail = bootstrap_ratio(a, b, 95, {.resamples = 500, .seed = 9});
  REQUIRE(tail.has_value());
  CHECK(tail->estimate == percentile(b, 95) / percentile(a, 95));
  CHECK(tail->low < tail->high);
}

TEST_CASE("bootstrap: the ratio is undefined when A's median can be zero") {
  const std::vector<double> zeros{0, 0, 0, 1, 2};
  const std::vector<double> b{1, 2, 3, 4, 5};
  CHECK_FALSE(bootstrap_median_ratio(zeros, b, {}).has_value());
  CHECK_FALSE(bootstrap_median_ratio(std::vector<double>{}, b, {}).has_value());
}

TEST_CASE("holm: adjusted p-values of a worked example, in input order") {
  // Sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → max(0.06, 0.04) = 0.06
  // (R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02).
  const std::vector<double> adjusted = holm_adjust(std::vector<double>{0.01, 0.04, 0.03, 0.005});
  REQUIRE(adjusted.size() == 4);
  CHECK_THAT(adjusted[0], WithinRel(0.03, 1e-12));
  CHECK_THAT(adjusted[1], WithinRel(0.06, 1e-12));
  CHECK_THAT(adjusted[2], WithinRel(0.06, 1e-12));
  CHECK_THAT(adjusted[3], WithinRel(0.02, 1e-12));
  CHECK(holm_adjust(std::vector<double>{0.5, 0.6}) == std::vector<double>{1.0, 1.0});
  CHECK(holm_adjust(std::vector<double>{}).empty());
  CHECK(holm_adjust(std::vector<double>{0.04}) == std::vector<double>{0.04});
}

TEST_CASE("holm: adjusted values are monotone in the raw ones and never below them") {
  Noise noise(99);
  std::vector<double> raw(12);
  for (double& p : raw) p = noise.uniform() * 0.2;
  const std::vector<double> adjusted = holm_adjust(raw);
  for (size_t i = 0; i < raw.size(); ++i) {
    CHECK(adjusted[i] >= raw[i]);
    CHECK(adjusted[i] <= 1.0);
    for (size_t j = 0; j < raw.size(); ++j) {
      if (raw[i] < raw[j])
        CHECK(adjusted[i] <= adjusted[j]);
    }
  }
}

TEST_CASE("loss curves: bitwise identical") {
  const std::vector<float> curve{2.3f, 1.9f, 1.2f, 0.8f};
  const CurveComparison result = compare_curves(curve, curve);
  CHECK(result.identical);
  CHECK_FALSE(result.first_divergence.has_value());
  CHECK(result.max_abs_difference == 0.0);
  CHECK_FALSE(result.max_difference_index.has_value());
}

TEST_CASE("loss curves: first divergence and largest difference") {
  const std::vector<float> a{2.3f, 1.9f, 1.2f, 0.8f, 0.5f, 0.4f};
  std::vector<float> b = a;
  b[2] = std::nextafter(a[2], 2.0f);  // one ulp: not identical, tiny difference
  b[4] = 0.75f;
  const CurveComparison result = compare_curves(a, b);
  CHECK_FALSE(result.identical);
  CHECK(result.first_divergence == std::optional<size_t>(2));
  CHECK(result.max_difference_index == std::optional<size_t>(4));
  CHECK(result.max_abs_difference == 0.25);
}

TEST_CASE("loss curves: a shorter curve diverges where it ends") {
  const std::vector<float> a{1.0f, 0.5f, 0.25f};
  const std::vector<float> b{1.0f, 0.5f};
  const CurveComparison result = compare_curves(a, b);
  CHECK_FALSE(result.identical);
  CHECK(result.first_divergence == std::optional<size_t>(2));
  CHECK(result.max_abs_difference == 0.0);
  CHECK(result.length_a == 3);
  CHECK(result.length_b == 2);
}

TEST_CASE("loss curves: signed zeros and NaN are compared by bits") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const CurveComparison zeros = compare_curves(std::vector<float>{0.0f}, std::vector<float>{-0.0f});
  CHECK_FALSE(zeros.identical);
  CHECK(zeros.max_abs_difference == 0.0);
  CHECK(compare_curves(std::vector<float>{1.0f, nan}, std::vector<float>{1.0f, nan}).identical);
  const CurveComparison diverged = compare_curves(std::vector<float>{1.0f, 0.5f}, std::vector<float>{1.0f, nan});
  CHECK(diverged.first_divergence == std::optional<size_t>(1));
  CHECK(std::isinf(diverged.max_abs_difference));
}
