// Run-level judgement of timing metrics: known answers for the distributions and estimators, the
// verdict rules, and simulated comparisons with known between-run noise and autocorrelated steps
// (false-positive rate and detection rate at the default thresholds).
#include <cmath>

#include "noise.hpp"
#include "simulated_runs.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/run_noise.hpp"
#include "expctl/compare/statistics.hpp"

namespace expctl::compare {
namespace {

using testing::RunModel;
using testing::Scenario;
using testing::simulate_outcomes;

RunLevelMetric throughput(std::vector<double> a, std::vector<double> b, std::vector<std::vector<double>> history = {}) {
  return {"samples_per_sec", Direction::higher_is_better, parse_threshold("-5%"), std::move(a),
          std::move(b),      std::move(history)};
}

TEST_CASE("student t cdf and quantile match known values") {
  CHECK(student_t_cdf(2.0, 5) == Approx(0.9490302605).epsilon(1e-9));
  CHECK(student_t_cdf(-2.0, 5) == Approx(1 - 0.9490302605).margin(1e-9));
  CHECK(student_t_cdf(0.0, 3.7) == Approx(0.5));
  // df = 2 has a closed form: 1/2 + t / (2 sqrt(2 + t^2)).
  CHECK(student_t_cdf(1.3, 2) == Approx(0.5 + 1.3 / (2 * std::sqrt(2 + 1.69))).epsilon(1e-12));
  CHECK(student_t_quantile(0.975, 10) == Approx(2.228138852).epsilon(1e-8));
  CHECK(student_t_quantile(0.995, 4) == Approx(4.604094871).epsilon(1e-8));
  CHECK(student_t_quantile(0.99, 1) == Approx(31.82051595).epsilon(1e-8));
  CHECK(student_t_quantile(0.025, 10) == Approx(-2.228138852).epsilon(1e-8));
  CHECK(student_t_quantile(0.999, 0.5) > 1000);
  CHECK(normal_quantile(0.975) == Approx(1.959963985).epsilon(1e-9));
}

TEST_CASE("hodges lehmann shift is the median of pairwise differences and ignores one wild run") {
  CHECK(hodges_lehmann_shift(std::vector<double>{10}, std::vector<double>{12.5}) == 2.5);
  CHECK(hodges_lehmann_shift(std::vector<double>{1, 2, 3}, std::vector<double>{2, 3, 4}) == 1);
  CHECK(hodges_lehmann_shift(std::vector<double>{1, 2, 3, 4, 5}, std::vector<double>{2, 3, 4, 5, 600}) == Approx(1.0));
}

TEST_CASE("pooled robust scales estimate the standard deviation and share it across groups") {
  testing::Noise noise(7);
  std::vector<std::vector<double>> groups;
  for (int group = 0; group < 200; ++group) {
    groups.push_back(noise.samples(5, 100.0 * (group + 1), 0.0));
    for (double& value : groups.back()) value += 3 * noise.normal();  // sd 3 around a different centre each
  }
  CHECK(pooled_shamos_scale(groups).value() == Approx(3.0).epsilon(0.05));
  CHECK(pooled_huber_scale(groups).value() == Approx(3.0).epsilon(0.05));
  CHECK_FALSE(pooled_shamos_scale(std::vector<std::vector<double>>{{1.0}, {2.0}}));
  CHECK_FALSE(pooled_huber_scale(std::vector<std::vector<double>>{{1.0}, {2.0}}));
}

TEST_CASE("one wild run moves the huber scale by a bounded amount and the standard deviation without bound") {
  const std::vector<std::vector<double>> quiet = {{10, 10.1, 9.9, 10.05, 9.95}};
  const std::vector<std::vector<double>> wild = {{10, 10.1, 9.9, 10.05, 500}};
  const double before = pooled_huber_scale(quiet).value();
  CHECK(pooled_huber_scale(wild).value() < 4 * before);  // the wild residual counts as 2.5 s0 at most
  CHECK(stddev(wild[0]) > 100 * before);
  // Two values: the median-centred residuals are ±d/2, never clipped (Shamos gives 1.05·d), so
  // the estimate is the plain deviation up to the consistency factor.
  CHECK(pooled_huber_scale(std::vector<std::vector<double>>{{1.0, 3.0}}).value() ==
        Approx(std::sqrt(2.0 / 0.97756)).epsilon(1e-6));
}

TEST_CASE("noise estimates count runs and effective degrees of freedom per group") {
  const std::vector<std::vector<double>> groups = {{100, 103, 98}, {50}, {200, 206}};
  const NoiseEstimate noise = estimate_noise(groups, Scale::relative);
  CHECK(noise.runs == 5);
  CHECK(noise.groups == 2);
  CHECK(noise.df == Approx(3 * k_noise_df_efficiency));
  CHECK(noise.known());
  CHECK_FALSE(estimate_noise(std::vector<std::vector<double>>{{1.0}}, Scale::relative).known());
}

TEST_CASE("one run a side and no history is inconclusive with the rerun hint") {
  const Verdict verdict = judge_run_level(throughput({4000}, {3728}));
  CHECK(verdict.status == Status::inconclusive);
  CHECK(verdict.reason ==
        "-6.8% with 1+1 runs and no earlier runs of the same spec on the same environment: the run-to-run noise "
        "is unknown; rerun with `expctl ab … --repeat 5`");
  REQUIRE(verdict.run_evidence);
  CHECK_FALSE(verdict.run_evidence->noise.known());
  CHECK(std::isnan(verdict.run_evidence->mde));
}

TEST_CASE("a drop beyond the threshold inside the noise of earlier runs is inconclusive and says why") {
  const std::vector<double> history = {4000, 3700, 4150, 3850, 4300, 3900, 4050};  // about 5 % noise
  const Verdict verdict = judge_run_level(throughput({4000}, {3728}, {history}));
  CHECK(verdict.status == Status::inconclusive);
  CHECK_THAT(verdict.reason, Catch::StartsWith("-6.8% is inside the ±"));
  CHECK_THAT(verdict.reason, Catch::Contains("run-to-run noise band of 7 earlier runs (t-test p = 0.366 > 0.01, one "
                                             "metric at level 0.01); rerun with `expctl ab … --repeat "));
  REQUIRE(verdict.run_evidence);
  CHECK(verdict.run_evidence->history_runs == 7);
  CHECK(verdict.run_evidence->noise_fraction == Approx(0.05).epsilon(0.5));
  CHECK(verdict.run_evidence->mde > 0.05);
  CHECK(verdict.run_evidence->suggested_repeat >= 2);
}

TEST_CASE("a large drop with five quiet runs a side is a regression and a small one is ok") {
  const std::vector<double> a = {4000, 4020, 3990, 4010, 3980};
  const Verdict slower = judge_run_level(throughput(a, {3600, 3590, 3620, 3610, 3580}));
  CHECK(slower.status == Status::regression);
  CHECK_THAT(slower.reason, Catch::StartsWith("-10.0% is beyond threshold -5% and the ±"));
  CHECK_THAT(slower.reason, Catch::Contains("noise band of 5+5 runs (t-test p = 1.32e-09 <= 0.01, one metric at "
                                            "level 0.01)"));
  const Verdict same = judge_run_level(throughput(a, {3990, 4005, 3985, 4015, 3995}));
  CHECK(same.status == Status::ok);
  CHECK_THAT(same.reason, Catch::Contains("within threshold -5% (noise ±"));
  const Verdict faster = judge_run_level(throughput(a, {4400, 4420, 4390, 4410, 4380}));
  CHECK(faster.status == Status::improvement);
}

TEST_CASE("a change within the threshold whose noise exceeds it is inconclusive") {
  const Verdict verdict = judge_run_level(throughput({4000}, {3950}, {{4000, 3400, 4600, 3700, 4300}}));
  CHECK(verdict.status == Status::inconclusive);
  CHECK_THAT(verdict.reason, Catch::Contains("is within threshold -5%, but the change's noise"));
}

TEST_CASE("an absolute threshold judges on the metric's own scale") {
  const RunLevelMetric wait{"comm_wait_fraction",
                            Direction::lower_is_better,
                            parse_threshold("+5pp"),
                            {0.10, 0.11, 0.10, 0.105, 0.10},
                            {0.30, 0.31, 0.29, 0.30, 0.305},
                            {}};
  const Verdict verdict = judge_run_level(wait);
  CHECK(verdict.status == Status::regression);
  REQUIRE(verdict.run_evidence);
  CHECK(verdict.run_evidence->scale == Scale::absolute);
  CHECK(verdict.run_evidence->change == Approx(0.2).margin(0.01));
  CHECK_THAT(verdict.reason, Catch::StartsWith("+20.00pp is beyond threshold +5pp"));
}

TEST_CASE("a side without a value is too few samples") {
  const Verdict verdict = judge_run_level(throughput({}, {4000}));
  CHECK(verdict.status == Status::too_few_samples);
}

TEST_CASE("runs needed and the noise floor warning for suites") {
  const NoiseEstimate history =
      estimate_noise(std::vector<std::vector<double>>{{100, 103, 97, 101, 99, 102}}, Scale::relative);
  const size_t runs = runs_needed(history, history.sigma, 0.05, Scale::relative, Direction::higher_is_better, 1, {});
  CHECK(runs >= 2);
  CHECK(runs <= 10);
  CHECK(runs_needed(history, 0.5, 0.05, Scale::relative, Direction::higher_is_better, 1, {}) == 0);
  CHECK_FALSE(threshold_below_noise("samples_per_sec", parse_threshold("-5%"), history));
  const auto warning = threshold_below_noise("samples_per_sec", parse_threshold("-1%"), history);
  REQUIRE(warning);
  CHECK_THAT(*warning, Catch::StartsWith("threshold -1% of samples_per_sec is below its run-to-run noise of ±"));
}

// ---------------------------------------------------------------------------------------------
// Simulated comparisons. Between-run noise is the standard deviation of ln(speed) from run to run
// (≈ its coefficient of variation); steps add AR(1) noise (autocorrelation 0.9) and 1 % stalls.

TEST_CASE("simulated A/A comparisons are a regression in at most 1 % at every noise level and evidence") {
  const Scenario scenarios[] = {{1, 1, 7}, {5, 5, 0}, {2, 2, 3}};
  uint64_t seed = 100;
  for (const double between : {0.05, 0.10, 0.15}) {
    for (const Scenario& scenario : scenarios) {
      const auto rates = simulate_outcomes(++seed, {.between = between}, scenario, 1.0, 1000);
      INFO("between-run noise " << between << ", runs " << scenario.runs_a << "+" << scenario.runs_b << ", history "
                                << scenario.history << ": regression " << rates.rate(rates.regression) << ", ok "
                                << rates.rate(rates.ok) << ", inconclusive " << rates.rate(rates.inconclusive));
      CHECK(rates.rate(rates.regression) <= 0.01);
    }
  }
}

TEST_CASE("simulated 20 % slowdowns with five runs a side are detected in at least 90 %") {
  // A 20 % slowdown: B's samples/s are 20 % lower, its steps take 1.25 times as long.
  const auto rates = simulate_outcomes(7, {.between = 0.05}, {5, 5, 0}, 1.25, 1000);
  INFO("detected " << rates.rate(rates.regression) << ", inconclusive " << rates.rate(rates.inconclusive));
  CHECK(rates.rate(rates.regression) >= 0.90);
  CHECK(rates.ok == 0);
}

TEST_CASE("simulated 20 % slowdowns are never called ok whatever the noise") {
  uint64_t seed = 200;
  for (const double between : {0.05, 0.10, 0.15}) {
    for (const Scenario& scenario : {Scenario{5, 5, 0}, Scenario{1, 1, 7}, Scenario{5, 5, 10}}) {
      const auto rates = simulate_outcomes(++seed, {.between = between}, scenario, 1.25, 1000);
      INFO("between-run noise " << between << ", runs " << scenario.runs_a << "+" << scenario.runs_b << ", history "
                                << scenario.history << ": detected " << rates.rate(rates.regression)
                                << ", inconclusive " << rates.rate(rates.inconclusive) << ", ok "
                                << rates.rate(rates.ok));
      CHECK(rates.rate(rates.ok) <= 0.01);
    }
  }
}

TEST_CASE("per-step tests on the same simulated A/A pairs flag most of them (why steps are not replicates)") {
  testing::Noise noise(11);
  const RunModel model{.between = 0.05};
  size_t flagged = 0;
  for (int pair = 0; pair < 200; ++pair) {
    std::vector<double> a;
    std::vector<double> b;
    for (auto* side : {&a, &b}) {
      const double speed = model.samples_per_sec * std::exp(model.between * noise.normal());
      for (size_t step = 0; step < model.steps; ++step) side->push_back(speed * std::exp(0.02 * noise.normal()));
    }
    flagged += mann_whitney_u(a, b).p_value <= 0.01 ? 1 : 0;
  }
  INFO("per-step Mann-Whitney flags " << flagged << " of 200 identical configurations");
  CHECK(flagged >= 100);
}

}  // namespace
}  // namespace expctl::compare
