// The comparison model over runs written through the store API with known distributions.
#include <algorithm>
#include <fstream>

#include "noise.hpp"
#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

using testing::FakeRun;
using testing::Noise;

struct Fixture {
  test::TempDir dir;
  store::Store db = store::Store::open(dir / "expctl.db");

  RunData add(const FakeRun& run) { return load_run(db, testing::write_run(db, run)); }
};

FakeRun timed_run(uint64_t seed, double throughput, double noise = 0.01, size_t steps = 30) {
  Noise rng(seed);
  FakeRun run;
  run.throughput = rng.samples(steps, throughput, noise);
  for (const double rate : run.throughput) {
    run.step_time_ms.push_back(64.0 / rate * 1000.0);
  }
  run.loss = testing::fixture_loss(steps);
  run.eval_accuracy = 0.85;
  run.start_offset_s = static_cast<int>(seed);
  return run;
}

const MetricRow* row_of(const Comparison& comparison, std::string_view metric) {
  for (const auto& row : comparison.metrics) {
    if (row.verdict.metric == metric) {
      return &row;
    }
  }
  return nullptr;
}

TEST_CASE("identical runs are no regression, with bitwise identical loss curves") {
  Fixture f;
  const FakeRun run = timed_run(1, 1000.0);
  FakeRun again = run;
  again.start_offset_s = 100;
  const auto comparison = compare_runs({f.add(run)}, {f.add(again)}, {});
  CHECK(comparison.outcome == Outcome::no_regression);
  CHECK(comparison.verdict_line() == "no regression");
  CHECK(comparison.spec_changes.empty());
  CHECK(comparison.curve.curves.identical);
  CHECK(comparison.curve.sha_equal);
  CHECK(exit_code(comparison.outcome) == 0);
}

TEST_CASE("a 10 % throughput drop with 30 samples a side is a regression") {
  Fixture f;
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0))}, {f.add(timed_run(2, 900.0))}, {});
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  REQUIRE(row != nullptr);
  CHECK(row->source == MetricSource::step_samples);
  CHECK(row->n_a == 30);
  CHECK(row->n_b == 30);
  CHECK(row->verdict.status == Status::regression);
  REQUIRE(row->verdict.evidence);
  CHECK(row->verdict.evidence->adjusted_p < 0.05);
  CHECK(row_of(comparison, "step_time_ms_p50")->verdict.status == Status::regression);
  CHECK(comparison.outcome == Outcome::regression);
  CHECK(comparison.verdict_line().starts_with("regression in samples_per_sec"));
  CHECK(exit_code(comparison.outcome) == 3);
}

TEST_CASE("1 % noise between two runs of the same configuration is not flagged") {
  Fixture f;
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0))}, {f.add(timed_run(2, 1000.0))}, {});
  CHECK(comparison.outcome == Outcome::no_regression);
  CHECK(row_of(comparison, "samples_per_sec")->verdict.status == Status::ok);
}

TEST_CASE("a 1 % throughput drop below the 5 % threshold is not flagged even when significant") {
  Fixture f;
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0, 0.001))}, {f.add(timed_run(2, 990.0, 0.001))}, {});
  CHECK(row_of(comparison, "samples_per_sec")->verdict.status == Status::ok);
  CHECK(comparison.outcome == Outcome::no_regression);
}

TEST_CASE("fewer than five steps a side is too few samples, not a verdict") {
  Fixture f;
  const auto comparison =
      compare_runs({f.add(timed_run(1, 1000.0, 0.01, 3))}, {f.add(timed_run(2, 500.0, 0.01, 3))}, {});
  CHECK(row_of(comparison, "samples_per_sec")->verdict.status == Status::too_few_samples);
  CHECK(std::find(comparison.regressions.begin(), comparison.regressions.end(), "samples_per_sec") ==
        comparison.regressions.end());
}

TEST_CASE("a --threshold override replaces the default and is named as its origin") {
  Fixture f;
  CompareOptions options;
  options.thresholds.push_back(parse_threshold_override("samples_per_sec=-20%"));
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0))}, {f.add(timed_run(2, 900.0))}, options);
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  CHECK(row->threshold_origin == "--threshold");
  CHECK(row->verdict.status == Status::ok);
}

TEST_CASE("a threshold override for an unknown metric is an input error naming it") {
  Fixture f;
  CompareOptions options;
  options.thresholds.push_back(parse_threshold_override("speed=-5%"));
  const RunData run = f.add(timed_run(1, 1000.0));
  CHECK_THROWS_WITH(compare_runs({run}, {run}, options), Catch::Contains("unknown metric 'speed'"));
}

TEST_CASE("the spec's regression block sets thresholds") {
  Fixture f;
  RunData a = f.add(timed_run(1, 1000.0));
  RunData b = f.add(timed_run(2, 900.0));
  b.spec["regression"] = {{"samples_per_sec", "-15%"}};
  const auto comparison = compare_runs({a}, {b}, {});
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  CHECK(row->threshold_origin == "spec");
  CHECK(row->threshold.to_string() == "-15%");
  CHECK(row->verdict.status == Status::ok);
}

TEST_CASE("a spec change is shown with its hashed mark and --ignore leaves keys out") {
  Fixture f;
  FakeRun changed = timed_run(2, 1000.0);
  changed.spec["optim"]["lr"] = 0.1;
  changed.spec["seed"] = 7;
  const RunData a = f.add(timed_run(1, 1000.0));
  const RunData b = f.add(changed);
  const auto all = compare_runs({a}, {b}, {});
  REQUIRE(all.spec_changes.size() == 2);
  CHECK(all.spec_changes[0].path == "seed");
  CHECK(all.spec_changes[1].path == "optim.lr");
  CHECK(all.spec_changes[1].hashed);
  CompareOptions options;
  options.ignore = {"seed"};
  const auto ignored = compare_runs({a}, {b}, options);
  REQUIRE(ignored.spec_changes.size() == 1);
  CHECK(ignored.spec_changes[0].path == "optim.lr");
}

TEST_CASE("an environment change is shown grouped in the environment section") {
  Fixture f;
  FakeRun a = timed_run(1, 1000.0);
  a.fingerprint = testing::fixture_fingerprint("6.1.0-18-amd64");
  FakeRun b = timed_run(2, 1000.0);
  b.fingerprint = testing::fixture_fingerprint("6.1.0-21-amd64");
  const auto comparison = compare_runs({f.add(a)}, {f.add(b)}, {});
  REQUIRE(comparison.env_available);
  REQUIRE(comparison.env_changes.size() == 1);
  CHECK(comparison.env_changes[0].group == "host");
  CHECK(comparison.env_changes[0].field == "host.kernel");
  CHECK(comparison.env_changes[0].left == "6.1.0-18-amd64");
  CHECK(comparison.env_changes[0].right == "6.1.0-21-amd64");
}

TEST_CASE("runs on different datasets are not comparable") {
  Fixture f;
  FakeRun other = timed_run(2, 1000.0);
  other.spec["data"]["dataset"] = "mnist";
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0))}, {f.add(other)}, {});
  CHECK(comparison.outcome == Outcome::not_comparable);
  CHECK(comparison.verdict_line() == "not comparable: different datasets (synthetic vs mnist)");
  CHECK(exit_code(comparison.outcome) == 2);
}

TEST_CASE("different pinned stacks and recorded drift are not comparable") {
  Fixture f;
  FakeRun pinned = timed_run(2, 1000.0);
  pinned.env_profile = {{"libtorch_version", "1.13.1"}};
  const auto profile = compare_runs({f.add(timed_run(1, 1000.0))}, {f.add(pinned)}, {});
  CHECK(profile.verdict_line() ==
        "not comparable: pinned-stack mismatch (the specs pin different environment profiles)");

  RunData drifted = f.add(timed_run(3, 1000.0));
  drifted.summary["drift"] = nlohmann::json::array({{{"field", "host.os_id"}}});
  const auto drift = compare_runs({f.add(timed_run(4, 1000.0))}, {drifted}, {});
  CHECK(drift.outcome == Outcome::not_comparable);
  CHECK_THAT(drift.verdict_line(), Catch::Contains("drifted: host.os_id"));
}

TEST_CASE("a failed run is not comparable") {
  Fixture f;
  FakeRun failed = timed_run(2, 1000.0);
  failed.status = store::RunStatus::failed;
  const RunData b = f.add(failed);
  const auto comparison = compare_runs({f.add(timed_run(1, 1000.0))}, {b}, {});
  CHECK(comparison.verdict_line() == "not comparable: run " + b.record.id + " is failed");
}

TEST_CASE("loss curves that diverge report the first diverging step and the largest difference") {
  Fixture f;
  FakeRun a = timed_run(1, 1000.0);
  FakeRun b = a;
  b.start_offset_s = 50;
  b.loss[11] += 0.01;
  b.loss[20] += 0.5;
  const auto comparison = compare_runs({f.add(a)}, {f.add(b)}, {});
  CHECK_FALSE(comparison.curve.curves.identical);
  CHECK_FALSE(comparison.curve.sha_equal);
  CHECK(comparison.curve.first_divergence_step == 12);
  CHECK(comparison.curve.max_difference_step == 21);
  CHECK(comparison.curve.curves.max_abs_difference == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("groups compare eval accuracy across runs as samples") {
  Fixture f;
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int seed = 0; seed < 6; ++seed) {
    FakeRun base = timed_run(static_cast<uint64_t>(seed + 1), 1000.0);
    base.eval_accuracy = 0.90 + 0.001 * seed;
    a.push_back(f.add(base));
    FakeRun worse = timed_run(static_cast<uint64_t>(seed + 11), 1000.0);
    worse.eval_accuracy = 0.85 + 0.001 * seed;
    b.push_back(f.add(worse));
  }
  const auto comparison = compare_runs(a, b, {});
  const MetricRow* row = row_of(comparison, "eval_accuracy");
  REQUIRE(row != nullptr);
  CHECK(row->source == MetricSource::run_values);
  CHECK(row->n_a == 6);
  CHECK(row->verdict.status == Status::regression);
  const MetricRow* throughput = row_of(comparison, "samples_per_sec");
  CHECK(throughput->n_a == 180);  // per-step samples pooled over the group's runs
}

TEST_CASE("groups of three repeats are too few samples for per-run values") {
  Fixture f;
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int seed = 0; seed < 3; ++seed) {
    a.push_back(f.add(timed_run(static_cast<uint64_t>(seed + 1), 1000.0)));
    b.push_back(f.add(timed_run(static_cast<uint64_t>(seed + 11), 1000.0)));
  }
  const auto comparison = compare_runs(a, b, {});
  CHECK(row_of(comparison, "eval_accuracy")->verdict.status == Status::too_few_samples);
}

TEST_CASE("step samples aggregate ranks per step and leave out warm-up") {
  const std::vector<store::MetricPoint> points = {{0, 1, "samples_per_sec", 100}, {1, 1, "samples_per_sec", 100},
                                                  {0, 2, "samples_per_sec", 110}, {1, 2, "samples_per_sec", 120},
                                                  {0, 3, "samples_per_sec", 90},  {1, 3, "samples_per_sec", 95}};
  CHECK(step_samples(points, 1, true) == std::vector<double>{230, 185});
  CHECK(step_samples(points, 0, false) == std::vector<double>{100, 120, 95});
}

TEST_CASE("wait fractions are per step over all ranks, after warm-up") {
  const std::vector<store::MetricPoint> waits = {
      {0, 1, "comm_wait_ms", 5}, {0, 2, "comm_wait_ms", 1}, {1, 2, "comm_wait_ms", 3}, {0, 3, "comm_wait_ms", 0}};
  const std::vector<store::MetricPoint> times = {
      {0, 1, "step_time_ms", 10}, {0, 2, "step_time_ms", 10}, {1, 2, "step_time_ms", 10}, {0, 3, "step_time_ms", 4}};
  CHECK(wait_fraction_samples(waits, times, 1) == std::vector<double>{0.2, 0.0});
}

TEST_CASE("comm_wait_fraction is judged on per-step samples when the runs logged comm_wait_ms") {
  Fixture f;
  const auto with_waits = [&](uint64_t seed, double share) {
    const auto record = testing::write_run(f.db, timed_run(seed, 1000.0));
    Noise noise(seed + 100);
    std::vector<store::MetricPoint> points;
    const auto shares = noise.samples(30, share, 0.5);
    for (size_t i = 0; i < shares.size(); ++i) {
      points.push_back({0, static_cast<std::int64_t>(i + 1), "comm_wait_ms", std::max(0.0, shares[i]) * 64.0});
    }
    f.db.append_metrics(record.id, points);
    return load_run(f.db, *f.db.run(record.id));
  };
  const RunData a = with_waits(1, 0.10);
  const RunData b = with_waits(2, 0.10);
  const auto comparison = compare_runs({a}, {b}, {});
  const MetricRow* row = row_of(comparison, "comm_wait_fraction");
  REQUIRE(row != nullptr);
  CHECK(row->source == MetricSource::step_samples);
  CHECK(row->n_a == 30);
  CHECK(row->verdict.status == Status::ok);
  const auto worse = compare_runs({a}, {with_waits(3, 0.30)}, {});
  CHECK(row_of(worse, "comm_wait_fraction")->verdict.status == Status::regression);
}

TEST_CASE("load_run prefers the run folder's resolved spec over the canonical form") {
  Fixture f;
  const auto record = testing::write_run(f.db, timed_run(1, 1000.0));
  nlohmann::json spec = testing::fixture_spec();
  spec["regression"] = {{"final_train_loss", "+10%"}};
  std::ofstream(record.run_dir / "resolved.json")
      << nlohmann::json{{"spec", spec}, {"launch", nlohmann::json::object()}}.dump();
  const RunData data = load_run(f.db, record);
  CHECK(data.spec.at("regression").at("final_train_loss") == "+10%");
  CHECK(data.samples.at("samples_per_sec").size() == 30);
  CHECK(data.loss.size() == 30);
}

}  // namespace
}  // namespace expctl::compare
