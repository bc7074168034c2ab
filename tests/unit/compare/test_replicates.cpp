// Copies of one trajectory count once; loss questions are answered across seeds, paired by seed.
#include "noise.hpp"
#include "run_fixture.hpp"
#include "seed_simulation.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/replicates.hpp"

namespace expctl::compare {
namespace {

using Catch::Contains;
using testing::FakeRun;

struct Fixture {
  test::TempDir dir;
  store::Store db = store::Store::open(dir / "expctl.db");

  RunData add(const FakeRun& run) { return load_run(db, testing::write_run(db, run)); }
};

// A run of the quick start (side A) or of it with fp16 gradient compression (side B): another
// spec, so strict reproducibility is not asked, and one seed, so every repeat is one trajectory.
FakeRun same_seed_run(bool side_b, int offset_s, int seed = 1) {
  FakeRun run;
  run.spec = testing::fixture_spec("quickstart");
  run.spec["seed"] = seed;
  if (side_b) {
    run.spec["distributed"] = {{"grad_compression", "fp16"}};
  }
  run.loss = testing::fixture_loss(30, side_b ? 2.3 * 1.008 : 2.3);
  run.eval_accuracy = side_b ? 0.851 : 0.85;
  run.start_offset_s = offset_s;
  return run;
}

Comparison same_seed_ab(Fixture& f, int repeats) {
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int i = 0; i < repeats; ++i) {
    a.push_back(f.add(same_seed_run(false, 100 * i)));
    b.push_back(f.add(same_seed_run(true, 100 * i + 50)));
  }
  return compare_runs(a, b, {});
}

const MetricRow& row_of(const Comparison& comparison, std::string_view metric) {
  return testing::row_named(comparison, metric);
}

TEST_CASE("7+7 copies of one trajectory a side are one observation a side and get no p-value") {
  Fixture f;
  const Comparison comparison = same_seed_ab(f, 7);
  const MetricRow& loss = row_of(comparison, "final_train_loss");
  CHECK(loss.n_a == 1);
  CHECK(loss.n_b == 1);
  CHECK(loss.runs_a == 7);
  CHECK(loss.runs_b == 7);
  CHECK_FALSE(loss.verdict.evidence.has_value());  // no test, so no p-value and no zero-width interval
  CHECK(loss.verdict.status == Status::ok);
  CHECK(loss.verdict.reason ==
        "one trajectory per side (7 runs of A and 7 of B; copies of one trajectory count once): B's "
        "final_train_loss is +0.8% (within threshold +2%); one seed is no sample, so there is no p-value: vary the "
        "seed to judge it (expctl ab … --vary-seed --repeat 5)");
  CHECK(loss.change == "B is 0.8% higher than A (one trajectory per side: no interval; vary the seed to judge it)");
  CHECK_FALSE(row_of(comparison, "eval_accuracy").verdict.evidence.has_value());
}

TEST_CASE("one, three and seven copies a side get the same verdict: the evidence is the same") {
  for (const int repeats : {1, 3, 4, 7}) {
    Fixture f;
    INFO(repeats << " runs a side");
    const Comparison comparison = same_seed_ab(f, repeats);
    const MetricRow& loss = row_of(comparison, "final_train_loss");
    CHECK(loss.verdict.status == Status::ok);
    CHECK(loss.n_a == 1);
    CHECK_THAT(loss.verdict.reason, Contains("one trajectory per side"));
    CHECK_THAT(loss.verdict.reason, Contains("B's final_train_loss is +0.8% (within threshold +2%)"));
  }
}

TEST_CASE("one trajectory a side beyond the threshold is still flagged, as a fact about one seed") {
  Fixture f;
  FakeRun a = same_seed_run(false, 0);
  FakeRun b = same_seed_run(true, 50);
  b.loss = testing::fixture_loss(30, 2.3 * 1.05);
  a.start_offset_s = 0;
  const RunData a1 = f.add(a);
  a.start_offset_s = 10;
  const RunData a2 = f.add(a);
  const RunData b1 = f.add(b);
  b.start_offset_s = 60;
  const RunData b2 = f.add(b);
  const Comparison comparison = compare_runs({a1, a2}, {b1, b2}, {});
  const MetricRow& loss = row_of(comparison, "final_train_loss");
  CHECK(loss.verdict.status == Status::regression);
  CHECK_THAT(loss.verdict.reason, Contains("B's final_train_loss is +5.0% (worse beyond threshold +2%); one seed is "
                                           "no sample, so there is no p-value"));
}

TEST_CASE("copies inside a group of distinct trajectories count once") {
  Fixture f;
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int seed = 0; seed < 6; ++seed) {
    for (int copy = 0; copy < 2; ++copy) {
      FakeRun run_a = same_seed_run(false, 1000 * seed + 10 * copy, 100 + seed);
      run_a.loss = testing::fixture_loss(30, 2.3 + 0.01 * seed);
      a.push_back(f.add(run_a));
    }
    FakeRun run_b = same_seed_run(true, 1000 * seed + 500, 200 + seed);
    run_b.loss = testing::fixture_loss(30, 2.2 + 0.01 * seed);
    b.push_back(f.add(run_b));
  }
  const std::vector<Observation> observed = distinct_observations(a, "final_train_loss");
  REQUIRE(observed.size() == 6);
  CHECK(observed.front().run_ids.size() == 2);
  const Comparison comparison = compare_runs(a, b, {});
  const MetricRow& loss = row_of(comparison, "final_train_loss");
  CHECK(loss.n_a == 6);
  CHECK(loss.runs_a == 12);
  CHECK(loss.verdict.evidence->test.n_a == 6);
  CHECK_THAT(loss.verdict.reason, Contains("12 runs of A are 6 distinct trajectories, 6 of B are 6: copies count once"));
}

TEST_CASE("runs pair by seed only when both sides ran the same distinct seeds") {
  const auto run = [](const std::string& id, int seed) {
    return testing::simulated_run(id, "s", seed, 0.5, 0.5, 0.8);
  };
  const auto pairs = pair_by_seed({run("a1", 1), run("a2", 2), run("a3", 3)}, {run("b3", 3), run("b1", 1), run("b2", 2)});
  REQUIRE(pairs);
  CHECK(*pairs == std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 2}, {2, 0}});
  CHECK_FALSE(pair_by_seed({run("a1", 1), run("a2", 1)}, {run("b1", 1), run("b2", 1)}));  // one seed: copies
  CHECK_FALSE(pair_by_seed({run("a1", 1), run("a2", 2)}, {run("b1", 1), run("b3", 3)}));  // other seeds
  CHECK_FALSE(pair_by_seed({run("a1", 1)}, {run("b1", 1)}));                             // one run a side
}

TEST_CASE("a 1 % higher loss on every one of five seeds is found by the paired test") {
  // Seeds differ by several percent; within a seed B is 1 % (± 0.1 %) higher.
  const double a_losses[] = {0.512, 0.487, 0.531, 0.466, 0.503};
  const double ratios[] = {1.0105, 1.0092, 1.0111, 1.0098, 1.0101};
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int i = 0; i < 5; ++i) {
    a.push_back(testing::simulated_run(fmt::format("a{}", i), "sa", i + 1, a_losses[i], 0.6, 0.8));
    b.push_back(testing::simulated_run(fmt::format("b{}", i), "sb", i + 1, a_losses[i] * ratios[i], 0.6, 0.8));
  }
  const Comparison comparison = compare_runs(a, b, {});
  const MetricRow& loss = row_of(comparison, "final_train_loss");
  CHECK(loss.paired);
  CHECK(loss.n_a == 5);
  REQUIRE(loss.verdict.evidence);
  CHECK(loss.verdict.evidence->decided_by == SignificanceTest::paired_t);
  CHECK(loss.verdict.evidence->change == Approx(0.0101).margin(0.0002));
  CHECK(loss.verdict.status == Status::ok);  // significant, but inside the default +2 %
  CHECK_THAT(loss.verdict.reason, Contains("+1.0% across 5 seed pairs (95 % CI +0.9% to +1.1%) is significant "
                                           "(paired-t p = "));
  CHECK_THAT(loss.verdict.reason, Contains("Holm over 3 metrics at level 0.01) but within threshold +2%"));
  CHECK_THAT(loss.change, Catch::StartsWith("B is 1.0% higher than A (95 % CI +0.9% to +1.1%, 5 seed pairs)"));
  // The same pairs read as independent groups would bury the 1 % in the seeds' 5 % spread.
  std::vector<RunData> shuffled = b;
  for (size_t i = 0; i < shuffled.size(); ++i) shuffled[i].spec["seed"] = 10 + static_cast<int>(i);
  const Comparison independent = compare_runs(a, shuffled, {});
  const MetricRow& unpaired = row_of(independent, "final_train_loss");
  CHECK_FALSE(unpaired.paired);
  CHECK(unpaired.verdict.evidence->adjusted_p > 0.01);
}

TEST_CASE("simulation: unchanged specs across 5 seeds are called different in at most 1 % of comparisons") {
  const testing::SeedModel model{0.03, 0.003, 0.0, 5};
  const testing::SeedRates rates = testing::seed_rates(model, 4000, 20261205);
  CHECK(rates.any_significant <= 0.01);
  CHECK(rates.any_flagged <= 0.01);
}

TEST_CASE("simulation: a real 1 % loss difference across 5 seeds is found") {
  // Pair noise 0.1 %: a change that does not itself perturb training (the trajectories of one
  // seed stay close); 0.3 %: one that does a little. bench/compare/seed_power.cpp prints more.
  const std::vector<ThresholdOverride> tight = {parse_threshold_override("final_train_loss=+0.5%")};
  const testing::SeedRates quiet = testing::seed_rates({0.03, 0.001, 0.01, 5}, 1000, 7, tight);
  CHECK(quiet.loss_detected >= 0.99);
  CHECK(quiet.loss_regression >= 0.99);
  const testing::SeedRates perturbed = testing::seed_rates({0.03, 0.003, 0.01, 5}, 1000, 7, tight);
  CHECK(perturbed.loss_detected >= 0.7);
}

TEST_CASE("paired t test: known answer") {
  // scipy.stats.ttest_1samp([1, 2, 3, 4, 5], 0): t = 4.2426, p = 0.013236.
  const std::vector<double> differences = {1, 2, 3, 4, 5};
  const PairedTest test = paired_t_test(differences);
  CHECK(test.t == Approx(4.242640687));
  CHECK(test.p_value == Approx(0.0132356).epsilon(1e-4));
  CHECK(test.df == 4);
  CHECK(test.low == Approx(3 - 2.776445105 * std::sqrt(0.5)));
  CHECK(test.high == Approx(3 + 2.776445105 * std::sqrt(0.5)));
  const std::vector<double> constant = {0.01, 0.01, 0.01};
  CHECK(paired_t_test(constant).p_value == 0);
  const std::vector<double> zeros = {0, 0, 0};
  CHECK(paired_t_test(zeros).p_value == 1);
}

TEST_CASE("Holm levels and the significance wording say the test, the level and the correction") {
  const std::vector<double> p = {0.03, 0.0044, 0.5};
  const std::vector<double> levels = holm_levels(p, 0.01);
  CHECK(levels[1] == Approx(0.01 / 3));
  CHECK(levels[0] == Approx(0.01 / 2));
  CHECK(levels[2] == Approx(0.01));
  CHECK(significance_text("t-test", 0.0044, 0.0132, 0.01 / 3, 0.01, 3) ==
        "t-test p = 0.0044 > 0.0033, Holm over 3 metrics at level 0.01");
  CHECK(significance_text("paired-t", 0.001, 0.003, 0.01 / 3, 0.01, 3) ==
        "paired-t p = 0.001 <= 0.0033, Holm over 3 metrics at level 0.01");
  CHECK(significance_text("t-test", 0.004, 0.012, 0.005, 0.01, 2) ==
        "t-test p = 0.004 <= 0.005, but a smaller p failed first (Holm-adjusted 0.012 > 0.01), Holm over 2 "
        "metrics at level 0.01");
  CHECK(significance_text("t-test", 0.2, 0.2, 0.01, 0.01, 1) == "t-test p = 0.2 > 0.01, one metric at level 0.01");
}

}  // namespace
}  // namespace expctl::compare
