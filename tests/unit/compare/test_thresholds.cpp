#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "noise.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/thresholds.hpp"

using namespace expctl::compare;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
using expctl::compare::testing::Noise;
using expctl::util::CompareError;

namespace {

std::string error_of(const std::string& text) {
  const auto threshold = try_parse_threshold(text);
  return threshold ? std::string("(parsed)") : threshold.error().message;
}

SampledMetric throughput(std::vector<double> a, std::vector<double> b) {
  return SampledMetric{"samples_per_sec",      Direction::higher_is_better,
                       parse_threshold("-5%"), Statistic::median,
                       std::move(a),           std::move(b)};
}

}  // namespace

TEST_CASE("thresholds: relative, percentage-point and absolute forms") {
  const Threshold drop = parse_threshold("-5%");
  CHECK(drop.unit == ThresholdUnit::percent);
  CHECK(drop.sign == ThresholdSign::minus);
  CHECK(drop.amount == 5.0);
  CHECK(drop.is_relative());
  CHECK(drop.tolerance() == 0.05);

  CHECK(parse_threshold("5%").sign == ThresholdSign::none);
  CHECK(parse_threshold("+2%").sign == ThresholdSign::plus);
  CHECK(parse_threshold("+2%").tolerance() == 0.02);

  const Threshold absolute = parse_threshold("0.002");
  CHECK(absolute.unit == ThresholdUnit::absolute);
  CHECK_FALSE(absolute.is_relative());
  CHECK(absolute.tolerance() == 0.002);

  const Threshold half = parse_threshold("-0.5");
  CHECK(half.unit == ThresholdUnit::absolute);
  CHECK(half.sign == ThresholdSign::minus);
  CHECK(half.tolerance() == 0.5);

  const Threshold points = parse_threshold("-0.5pp");
  CHECK(points.unit == ThresholdUnit::percentage_points);
  CHECK(points.tolerance() == 0.005);

  CHECK(parse_threshold("  -5%\t") == drop);
  CHECK(parse_threshold("2e-3").tolerance() == 0.002);
  CHECK(parse_threshold(".5%").tolerance() == 0.005);
}

TEST_CASE("thresholds: canonical spelling reads back the same") {
  for (const std::string text : {"-5%", "+2%", "5%", "0.002", "-0.5", "-0.5pp", "+5pp", "12.25%"}) {
    CAPTURE(text);
    const Threshold threshold = parse_threshold(text);
    CHECK(threshold.to_string() == text);
    CHECK(parse_threshold(threshold.to_string()) == threshold);
  }
  CHECK(parse_threshold("5.0%").to_string() == "5%");
}

TEST_CASE("thresholds: garbage is refused with one clear line") {
  CHECK(
      error_of("abc") ==
      R"(invalid threshold "abc": write a relative change like "-5%", percentage points like "-0.5pp" or an absolute change like "0.002")");
  for (const std::string text :
       {"", " ", "%", "-", "5%%", "--5%", "+-5", "5 %", "nan", "inf", "-inf%", "1,5%", "0x10", "5pct", "%5", "pp"}) {
    CAPTURE(text);
    CHECK_THAT(error_of(text), Contains("invalid threshold"));
  }
  try {
    parse_threshold("fast");
    FAIL("no exception");
  } catch (const CompareError& error) {
    CHECK(error.exit_code() == expctl::util::ExitCode::usage);
    CHECK_THAT(std::string(error.what()), Contains(R"("fast")"));
  }
}

TEST_CASE("thresholds: numbers from the spec are absolute") {
  CHECK(threshold_from_number(-0.5).to_string() == "-0.5");
  CHECK(threshold_from_number(0.002) == parse_threshold("0.002"));
  CHECK_THROWS_AS(threshold_from_number(std::numeric_limits<double>::quiet_NaN()), CompareError);
}

TEST_CASE("thresholds: --threshold NAME=VALUE") {
  const ThresholdOverride override_ = parse_threshold_override("samples_per_sec=-3%");
  CHECK(override_.metric == "samples_per_sec");
  CHECK(override_.threshold == parse_threshold("-3%"));
  CHECK_THROWS_WITH(parse_threshold_override("samples_per_sec"),
                    R"(--threshold "samples_per_sec": expected NAME=VALUE, e.g. samples_per_sec=-5%)");
  CHECK_THROWS_WITH(parse_threshold_override("=5%"), Contains("expected NAME=VALUE"));
  CHECK_THROWS_WITH(parse_threshold_override("eval_loss=lots"), Contains(R"(invalid threshold "lots")"));
}

TEST_CASE("thresholds: a sign must point in the worse direction") {
  CHECK_THROWS_WITH(
      check_threshold_direction("samples_per_sec", parse_threshold("+5%"), Direction::higher_is_better),
      R"(threshold "+5%" for "samples_per_sec" points the wrong way: higher is better, so a regression is a drop; write "-5%")");
  CHECK_THROWS_WITH(check_threshold_direction("eval_loss", parse_threshold("-2%"), Direction::lower_is_better),
                    Contains(R"(write "+2%")"));
  CHECK_NOTHROW(check_threshold_direction("samples_per_sec", parse_threshold("-5%"), Direction::higher_is_better));
  CHECK_NOTHROW(check_threshold_direction("samples_per_sec", parse_threshold("5%"), Direction::higher_is_better));
  CHECK_NOTHROW(check_threshold_direction("eval_loss", parse_threshold("2%"), Direction::lower_is_better));
}

TEST_CASE("metric table: defaults parse, point the worse way, and names are unique") {
  std::set<std::string_view> names;
  for (const MetricInfo& metric : k_metrics) {
    CAPTURE(metric.name);
    CHECK(names.insert(metric.name).second);
    CHECK(try_parse_threshold(metric.default_threshold).has_value());
    CHECK_NOTHROW(check_threshold_direction(metric.name, default_threshold(metric), metric.direction));
    CHECK(find_metric(metric.name) == &metric);
  }
  CHECK(find_metric("no_such_metric") == nullptr);
  CHECK(default_threshold(*find_metric("samples_per_sec")) == parse_threshold("-5%"));
  CHECK(default_threshold(*find_metric("final_train_loss")) == parse_threshold("+2%"));
  CHECK(default_threshold(*find_metric("eval_accuracy")).tolerance() == 0.005);  // half a point of 0..1
  CHECK(find_metric("step_time_ms_p95")->statistic == Statistic::p95);
}

TEST_CASE("directions: spelled higher and lower") {
  CHECK(parse_direction("higher") == Direction::higher_is_better);
  CHECK(parse_direction("lower") == Direction::lower_is_better);
  CHECK_FALSE(parse_direction("up").has_value());
  CHECK(to_string(Direction::lower_is_better) == "lower");
}

TEST_CASE("verdict on values: relative threshold, both directions") {
  const Threshold drop = parse_threshold("-5%");
  const Verdict regression = judge_values("samples_per_sec", 100, 94, drop, Direction::higher_is_better);
  CHECK(regression.status == Status::regression);
  CHECK(regression.threshold_crossed);
  CHECK(regression.absolute_delta == -6.0);
  REQUIRE(regression.relative_delta.has_value());
  CHECK_THAT(*regression.relative_delta, WithinRel(-0.06, 1e-12));
  CHECK(regression.reason == "worse beyond threshold -5%");

  const Verdict at_limit = judge_values("samples_per_sec", 100, 95, drop, Direction::higher_is_better);
  CHECK(at_limit.status == Status::ok);
  CHECK(at_limit.reason == "within threshold -5%");
  CHECK(judge_values("samples_per_sec", 100, 110, drop, Direction::higher_is_better).status == Status::improvement);

  const Threshold rise = parse_threshold("+2%");
  CHECK(judge_values("final_train_loss", 1.0, 1.03, rise, Direction::lower_is_better).status == Status::regression);
  CHECK(judge_values("final_train_loss", 1.0, 1.01, rise, Direction::lower_is_better).status == Status::ok);
  CHECK(judge_values("final_train_loss", 1.0, 0.9, rise, Direction::lower_is_better).status == Status::improvement);
}

TEST_CASE("verdict on values: percentage points and absolute thresholds") {
  const Threshold points = parse_threshold("-0.5pp");
  CHECK(judge_values("eval_accuracy", 0.90, 0.894, points, Direction::higher_is_better).status == Status::regression);
  CHECK(judge_values("eval_accuracy", 0.90, 0.896, points, Direction::higher_is_better).status == Status::ok);
  const Threshold absolute = parse_threshold("0.002");
  CHECK(judge_values("eval_loss", 0.010, 0.013, absolute, Direction::lower_is_better).status == Status::regression);
  CHECK(judge_values("eval_loss", 0.010, 0.0115, absolute, Direction::lower_is_better).status == Status::ok);
}

TEST_CASE("verdict on values: zero baseline and non-finite values") {
  const Threshold rise = parse_threshold("+2%");
  const Verdict from_zero = judge_values("comm_wait", 0, 0.1, rise, Direction::lower_is_better);
  CHECK(from_zero.status == Status::regression);
  CHECK_FALSE(from_zero.relative_delta.has_value());
  CHECK(judge_values("comm_wait", 0, 0, rise, Direction::lower_is_better).status == Status::ok);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Verdict diverged = judge_values("final_train_loss", 0.5, nan, rise, Direction::lower_is_better);
  CHECK(diverged.status == Status::regression);
  CHECK(diverged.reason == "B is not finite (nan)");
  CHECK(judge_values("final_train_loss", nan, 0.5, rise, Direction::lower_is_better).status == Status::improvement);
}

TEST_CASE("verdict on samples: identical samples are no regression") {
  const std::vector<double> values = Noise(1).samples(30, 1200, 0.02);
  const std::vector<Verdict> verdicts = judge_samples(std::vector{throughput(values, values)}, {});
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].status == Status::ok);
  REQUIRE(verdicts[0].evidence.has_value());
  CHECK(verdicts[0].evidence->test.p_value == 1.0);
  CHECK(verdicts[0].absolute_delta == 0.0);
}

TEST_CASE("verdict on samples: a 10 % throughput drop with 30 samples a side is flagged") {
  Noise noise(20261129);
  const std::vector<double> a = noise.samples(30, 1200, 0.02);
  const std::vector<double> b = noise.samples(30, 1080, 0.02);
  const Verdict verdict = judge_samples(std::vector{throughput(a, b)}, {.bootstrap = {.seed = 7}}).at(0);
  CHECK(verdict.status == Status::regression);
  CHECK(verdict.threshold_crossed);
  CHECK(verdict.a == median(a));
  CHECK(verdict.b == median(b));
  REQUIRE(verdict.evidence.has_value());
  CHECK(verdict.evidence->adjusted_p < 1e-6);
  REQUIRE(verdict.evidence->ratio.has_value());
  CHECK(verdict.evidence->ratio->low < 0.9);
  CHECK(verdict.evidence->ratio->high > 0.9);
  CHECK_THAT(verdict.reason, Contains("median worse beyond threshold -5% and significant (mann-whitney p = "));
}

TEST_CASE("verdict on samples: 1 % noise is not flagged") {
  Noise noise(77);
  const std::vector<double> a = noise.samples(30, 1200, 0.01);
  const std::vector<double> same = noise.samples(30, 1200, 0.01);
  const std::vector<double> slower = noise.samples(30, 1188, 0.01);  // a real 1 % drop, within -5 %
  const std::vector<Verdict> verdicts = judge_samples(std::vector{throughput(a, same), throughput(a, slower)}, {});
  CHECK(verdicts[0].status == Status::ok);
  CHECK(verdicts[1].status == Status::ok);
  CHECK_FALSE(verdicts[1].threshold_crossed);
  CHECK_THAT(verdicts[1].reason, Contains("within threshold -5%"));
}

TEST_CASE("verdict on samples: 3 samples are too few to conclude") {
  const Verdict verdict = judge_samples(std::vector{throughput({100, 101, 99}, {50, 51, 49})}, {}).at(0);
  CHECK(verdict.status == Status::too_few_samples);
  CHECK_FALSE(verdict.evidence.has_value());
  CHECK(verdict.a == 100.0);
  CHECK(verdict.b == 50.0);
  CHECK(verdict.reason == "too few samples: A has 3, B has 3 (at least 5 per side are needed to conclude)");
  CHECK(to_string(verdict.status) == "too few samples");

  const Verdict empty = judge_samples(std::vector{throughput({}, {1, 2, 3, 4, 5})}, {}).at(0);
  CHECK(empty.status == Status::too_few_samples);
  CHECK(std::isnan(empty.a));
}

TEST_CASE("verdict on samples: beyond the threshold but noisy is not a regression") {
  // Medians 100 → 94 (−6 %), but the values overlap so much that U cannot tell them apart.
  const Verdict verdict =
      judge_samples(std::vector{throughput({100, 80, 120, 90, 110}, {94, 75, 114, 85, 104})}, {}).at(0);
  CHECK(verdict.threshold_crossed);
  CHECK(verdict.status == Status::ok);
  CHECK_THAT(verdict.reason, Contains("but not significant"));
}

TEST_CASE("verdict on samples: Holm's correction across metrics changes the decision") {
  // U_B = 2 (6.5 beats 5 and 6): exact two-sided p = 2·P(U ≤ 2) = 0.0317 for 5 v 5.
  const SampledMetric borderline = throughput({5, 6, 7, 8, 9}, {1, 2, 3, 4, 6.5});
  SampleOptions at_5_percent;
  at_5_percent.alpha = 0.05;
  const Verdict alone = judge_samples(std::vector{borderline}, at_5_percent).at(0);
  CHECK(alone.status == Status::regression);
  CHECK_THAT(alone.evidence->adjusted_p, WithinRel(8.0 / 252.0, 1e-12));
  CHECK_THAT(alone.reason, Contains("mann-whitney p = 0.0317 <= 0.05, one metric at level 0.05"));
  // At the default level, 0.01 (the timing metrics' too), the same evidence is not enough.
  CHECK(judge_samples(std::vector{borderline}, {}).at(0).status == Status::ok);

  // With a second, unremarkable metric the adjusted p-value doubles past alpha.
  SampledMetric other = throughput({10, 11, 12, 13, 14}, {10.5, 11.5, 12.5, 13.5, 14.5});
  other.name = "step_time_ms_p50";
  const std::vector<Verdict> together = judge_samples(std::vector{borderline, other}, at_5_percent);
  CHECK(together[0].status == Status::ok);
  CHECK_THAT(together[0].evidence->adjusted_p, WithinRel(16.0 / 252.0, 1e-12));
  // The line says why a p of 0.03 is not significant: the level it had to meet after Holm.
  CHECK_THAT(together[0].reason,
             Contains("not significant (mann-whitney p = 0.0317 > 0.025, Holm over 2 metrics at level 0.05)"));
}

TEST_CASE("verdict on samples: a clear speed-up is an improvement") {
  Noise noise(4);
  const Verdict verdict =
      judge_samples(std::vector{throughput(noise.samples(30, 1000, 0.02), noise.samples(30, 1150, 0.02))}, {}).at(0);
  CHECK(verdict.status == Status::improvement);
  CHECK_FALSE(verdict.threshold_crossed);
}

TEST_CASE("verdict on samples: stalls in the tail are judged on p95 by the bootstrap") {
  Noise noise(12);
  const std::vector<double> a = noise.samples(200, 100, 0.02);
  std::vector<double> b = noise.samples(200, 100, 0.02);
  // Stalls in 10 % of B's steps move its p95 far up but barely move the ranks: the U test alone
  // (p ≈ 0.06 here) would not see them.
  for (size_t i = 0; i < b.size(); i += 10) b[i] *= 1.6;
  const SampledMetric tail{
      "step_time_ms_p95", Direction::lower_is_better, parse_threshold("+5%"), Statistic::p95, a, b};
  const Verdict verdict = judge_samples(std::vector{tail}, {}).at(0);
  CHECK(verdict.a == percentile(a, 95));
  CHECK(verdict.b == percentile(b, 95));
  CHECK(verdict.threshold_crossed);
  REQUIRE(verdict.evidence.has_value());
  CHECK(verdict.evidence->decided_by == SignificanceTest::bootstrap);
  CHECK(verdict.evidence->test.p_value > 0.05);
  CHECK(verdict.status == Status::regression);
  CHECK_THAT(verdict.reason, Contains("p95 worse beyond threshold +5% and significant (bootstrap p = "));

  // The same samples judged on the median are within the threshold.
  SampledMetric middle = tail;
  middle.name = "step_time_ms_p50";
  middle.statistic = Statistic::median;
  const Verdict median_verdict = judge_samples(std::vector{middle}, {}).at(0);
  CHECK(median_verdict.status == Status::ok);
  CHECK(median_verdict.evidence->decided_by == SignificanceTest::mann_whitney);
}

TEST_CASE("verdict on samples: intervals are reproducible for a fixed seed") {
  Noise noise(31);
  const SampledMetric metric = throughput(noise.samples(20, 1000, 0.03), noise.samples(20, 990, 0.03));
  const SampleOptions options{.bootstrap = {.seed = 123}};
  const Verdict first = judge_samples(std::vector{metric}, options).at(0);
  const Verdict second = judge_samples(std::vector{metric}, options).at(0);
  REQUIRE((first.evidence->ratio && second.evidence->ratio));
  CHECK(first.evidence->ratio->low == second.evidence->ratio->low);
  CHECK(first.evidence->ratio->high == second.evidence->ratio->high);
}

TEST_CASE("verdict on samples: another metric in front does not change an interval") {
  Noise noise(32);
  const SampledMetric metric = throughput(noise.samples(20, 1000, 0.03), noise.samples(20, 990, 0.03));
  SampledMetric other = throughput(noise.samples(20, 10, 0.03), noise.samples(20, 10, 0.03));
  other.name = "step_time_ms_p50";
  const SampleOptions options{.bootstrap = {.seed = 5}};
  const Verdict alone = judge_samples(std::vector{metric}, options).at(0);
  const Verdict second = judge_samples(std::vector{other, metric}, options).at(1);
  REQUIRE((alone.evidence->ratio && second.evidence->ratio));
  CHECK(alone.evidence->ratio->low == second.evidence->ratio->low);
  CHECK(alone.evidence->ratio->high == second.evidence->ratio->high);
}

TEST_CASE("verdict on samples: a lower median with stochastically larger B is no regression") {
  // A spreads evenly over 90..110 (median 100). B has 55 % of its steps at 94, which beat 20 %
  // of A, and 45 % at 200: its median drops 6 %, yet a random B beats a random A 56 % of the
  // time, significantly so with 500 a side. The two disagree, so nothing is concluded.
  std::vector<double> a(500);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 90 + 20 * (static_cast<double>(i) + 0.5) / 500;
  std::vector<double> b(275, 94);
  b.resize(500, 200);
  const Verdict verdict = judge_samples(std::vector{throughput(a, b)}, {}).at(0);
  CHECK(verdict.threshold_crossed);
  REQUIRE(verdict.evidence.has_value());
  CHECK_THAT(verdict.evidence->test.common_language, WithinRel(0.56, 1e-12));
  CHECK(verdict.evidence->adjusted_p < 0.05);
  CHECK(verdict.status == Status::ok);
  CHECK_THAT(verdict.reason, Contains("but the test's effect points the other way"));
}

TEST_CASE("verdict on samples: a non-finite sample is an input error naming the metric") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(judge_samples(std::vector{throughput({1, 2, 3, 4, 5}, {1, 2, nan, 4, 5})}, {}),
                    R"(metric "samples_per_sec": sample 2 of B is nan: per-step samples must be finite numbers)");
}
