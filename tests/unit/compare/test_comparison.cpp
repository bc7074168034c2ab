// The comparison model over runs written through the store API with known distributions.
#include <algorithm>
#include <fstream>

#include "noise.hpp"
#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/spec/program.hpp"
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

// Runs of one configuration whose speeds differ from run to run by `spread` (relative standard
// deviation), as repeats on a real machine do; the per-step noise within each run is 1 %.
std::vector<FakeRun> repeats(uint64_t seed, size_t count, double throughput, double spread) {
  Noise noise(seed + 1000);
  std::vector<FakeRun> runs;
  for (size_t i = 0; i < count; ++i) {
    runs.push_back(timed_run(seed + i, throughput * (1 + spread * noise.normal())));
    runs.back().start_offset_s = static_cast<int>(100 * seed + i);
  }
  return runs;
}

std::vector<RunData> add_all(Fixture& f, const std::vector<FakeRun>& runs) {
  std::vector<RunData> data;
  for (const auto& run : runs) data.push_back(f.add(run));
  return data;
}

TEST_CASE("identical single runs without history are inconclusive on timing and exit 0") {
  Fixture f;
  const FakeRun run = timed_run(1, 1000.0);
  FakeRun again = run;
  again.start_offset_s = 100;
  const auto comparison = compare_runs({f.add(run)}, {f.add(again)}, {});
  CHECK(comparison.outcome == Outcome::inconclusive);
  CHECK(comparison.verdict_line() ==
        "inconclusive: samples_per_sec +0.0% with 1+1 runs and no earlier runs of the same spec on the same "
        "environment: the run-to-run noise is unknown; rerun with `expctl ab … --repeat 5` (also step_time_ms_p50, "
        "step_time_ms_p95)");
  CHECK(comparison.spec_changes.empty());
  CHECK(comparison.curve.curves.identical);
  CHECK(comparison.curve.sha_equal);
  CHECK(exit_code(comparison.outcome) == 0);
  CHECK(exit_code(comparison.outcome, /*fail_on_inconclusive=*/true) == 3);
}

TEST_CASE("a 10 % drop between two single runs is inconclusive however many steps they have") {
  Fixture f;
  const auto comparison =
      compare_runs({f.add(timed_run(1, 1000.0, 0.01, 300))}, {f.add(timed_run(2, 900.0, 0.01, 300))}, {});
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  REQUIRE(row != nullptr);
  CHECK(row->source == MetricSource::run_values);
  CHECK(row->n_a == 1);
  CHECK(row->n_b == 1);
  CHECK(row->verdict.status == Status::inconclusive);
  CHECK(row->verdict.threshold_crossed);
  CHECK(comparison.outcome == Outcome::inconclusive);
  CHECK(comparison.inconclusive.front() == "samples_per_sec");
}

TEST_CASE("a 20 % drop with five quiet runs a side is a regression") {
  Fixture f;
  const auto a = add_all(f, repeats(1, 5, 1000.0, 0.01));
  const auto b = add_all(f, repeats(20, 5, 800.0, 0.01));
  const auto comparison = compare_runs(a, b, {});
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  REQUIRE(row != nullptr);
  CHECK(row->n_a == 5);
  CHECK(row->verdict.status == Status::regression);
  REQUIRE(row->verdict.run_evidence);
  CHECK(row->verdict.run_evidence->adjusted_p <= 0.01);
  CHECK(row_of(comparison, "step_time_ms_p50")->verdict.status == Status::regression);
  CHECK(comparison.outcome == Outcome::regression);
  CHECK_THAT(comparison.verdict_line(), Catch::StartsWith("regression in samples_per_sec, step_time_ms_p50"));
  CHECK(exit_code(comparison.outcome) == 3);
}

TEST_CASE("a single run inside the noise of seven quiet earlier runs is ok") {
  Fixture f;
  const auto earlier = add_all(f, repeats(1, 7, 1000.0, 0.01));
  const auto comparison = compare_runs({f.add(timed_run(30, 1000.0))}, {f.add(timed_run(31, 995.0))}, {}, earlier);
  const MetricRow* row = row_of(comparison, "samples_per_sec");
  CHECK(row->verdict.status == Status::ok);
  CHECK(row->history_runs == 7);
  CHECK(comparison.history.size() == 7);
  CHECK_THAT(row->verdict.reason, Catch::Contains("within threshold -5% (noise ±"));
  CHECK_THAT(row->verdict.reason, Catch::Contains("a run from 7 earlier runs, MDE "));
}

TEST_CASE("a 1 % throughput drop below the 5 % threshold is not flagged even when significant") {
  Fixture f;
  const auto comparison =
      compare_runs(add_all(f, repeats(1, 5, 1000.0, 0.001)), add_all(f, repeats(20, 5, 990.0, 0.001)), {});
  CHECK(row_of(comparison, "samples_per_sec")->verdict.status == Status::ok);
  CHECK(comparison.outcome == Outcome::no_regression);
}

TEST_CASE("a --threshold override replaces the default and is named as its origin") {
  Fixture f;
  CompareOptions options;
  options.thresholds.push_back(parse_threshold_override("samples_per_sec=-20%"));
  const auto comparison =
      compare_runs(add_all(f, repeats(1, 5, 1000.0, 0.01)), add_all(f, repeats(20, 5, 900.0, 0.01)), options);
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
  const auto a = add_all(f, repeats(1, 5, 1000.0, 0.01));
  auto b = add_all(f, repeats(20, 5, 900.0, 0.01));
  b.front().spec["regression"] = {{"samples_per_sec", "-15%"}};
  const auto comparison = compare_runs(a, b, {});
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

TEST_CASE("a program run against a built-in one compares what both specs hold, not the trainer's unused defaults") {
  Fixture f;
  // A program run recorded before its spec left the trainer's sections out still carries them.
  FakeRun program = timed_run(2, 1000.0);
  program.spec["program"] = {{"command", {"/usr/bin/python3", "train.py"}}, {"params", {{"lr", 0.05}}}};
  program.spec["data"]["dataset"] = "fashion-mnist";
  program.spec["optim"]["lr"] = 0.01;
  program.spec["distributed"]["bucket_cap_mb"] = 25.0;
  FakeRun builtin = timed_run(1, 1000.0);
  builtin.spec["data"]["dataset"] = "npy";
  builtin.spec["distributed"]["bucket_cap_mb"] = 50.0;
  const auto comparison = compare_runs({f.add(program)}, {f.add(builtin)}, {});
  CHECK(comparison.outcome != Outcome::not_comparable);
  std::vector<std::string> paths;
  for (const auto& change : comparison.spec_changes) {
    paths.push_back(change.path);
  }
  CHECK(std::find(paths.begin(), paths.end(), "program.command") != paths.end());
  for (const auto& path : paths) {
    INFO(path);
    CHECK_FALSE(expctl::spec::is_trainer_setting(path));
  }
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
  CHECK(throughput->n_a == 6);  // one value per run: the steps of a run are no replicates
}

TEST_CASE("groups of three distinct trajectories are too few samples for per-run values") {
  Fixture f;
  std::vector<RunData> a;
  std::vector<RunData> b;
  for (int seed = 0; seed < 3; ++seed) {
    FakeRun run_a = timed_run(static_cast<uint64_t>(seed + 1), 1000.0);
    run_a.eval_accuracy = 0.85 + 0.001 * seed;
    a.push_back(f.add(run_a));
    FakeRun run_b = timed_run(static_cast<uint64_t>(seed + 11), 1000.0);
    run_b.eval_accuracy = 0.84 + 0.001 * seed;
    b.push_back(f.add(run_b));
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

TEST_CASE("wait fractions are per step over all ranks after warm-up") {
  const std::vector<store::MetricPoint> waits = {
      {0, 1, "comm_wait_ms", 5}, {0, 2, "comm_wait_ms", 1}, {1, 2, "comm_wait_ms", 3}, {0, 3, "comm_wait_ms", 0}};
  const std::vector<store::MetricPoint> times = {
      {0, 1, "step_time_ms", 10}, {0, 2, "step_time_ms", 10}, {1, 2, "step_time_ms", 10}, {0, 3, "step_time_ms", 4}};
  CHECK(wait_fraction_samples(waits, times, 1) == std::vector<double>{0.2, 0.0});
}

TEST_CASE("comm_wait_fraction is judged on run values when the runs logged comm_wait_ms") {
  Fixture f;
  const auto with_waits = [&](uint64_t seed, double share) {
    const auto record = testing::write_run(f.db, timed_run(seed, 1000.0));
    Noise noise(seed + 100);
    std::vector<store::MetricPoint> points;
    const auto shares = noise.samples(30, share, 0.1);
    for (size_t i = 0; i < shares.size(); ++i) {
      points.push_back({0, static_cast<std::int64_t>(i + 1), "comm_wait_ms", std::max(0.0, shares[i]) * 64.0});
    }
    f.db.append_metrics(record.id, points);
    return load_run(f.db, *f.db.run(record.id));
  };
  std::vector<RunData> a;
  std::vector<RunData> same;
  std::vector<RunData> worse;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    a.push_back(with_waits(seed, 0.10));
    same.push_back(with_waits(seed + 10, 0.10));
    worse.push_back(with_waits(seed + 20, 0.30));
  }
  const auto comparison = compare_runs(a, same, {});
  const MetricRow* row = row_of(comparison, "comm_wait_fraction");
  REQUIRE(row != nullptr);
  CHECK(row->source == MetricSource::run_values);
  CHECK(row->n_a == 5);
  CHECK(row->verdict.status == Status::ok);
  CHECK(row_of(compare_runs(a, worse, {}), "comm_wait_fraction")->verdict.status == Status::regression);
}

FakeRun fingerprinted(uint64_t seed, double throughput, int offset_s) {
  FakeRun run = timed_run(seed, throughput);
  run.fingerprint = testing::fixture_fingerprint();
  run.start_offset_s = offset_s;
  return run;
}

TEST_CASE("load_history takes earlier completed runs of the same spec and environment only") {
  Fixture f;
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    expected.push_back(testing::write_run(f.db, fingerprinted(static_cast<uint64_t>(i + 1), 1000.0, 10 * i)).id);
  }
  FakeRun other_kernel = fingerprinted(5, 1000.0, 40);
  other_kernel.fingerprint = testing::fixture_fingerprint("6.1.0-21-amd64");
  testing::write_run(f.db, other_kernel);
  FakeRun failed = fingerprinted(6, 1000.0, 50);
  failed.status = store::RunStatus::failed;
  testing::write_run(f.db, failed);
  FakeRun other_spec = fingerprinted(10, 1000.0, 60);  // same environment, another learning rate
  other_spec.spec["optim"]["lr"] = 0.1;
  const auto other_spec_record = testing::write_run(f.db, other_spec);
  const RunData a = f.add(fingerprinted(7, 1000.0, 100));
  REQUIRE(other_spec_record.spec_hash != a.record.spec_hash);
  REQUIRE(other_spec_record.environment_hash == a.record.environment_hash);
  const RunData b = f.add(fingerprinted(8, 1000.0, 200));
  testing::write_run(f.db, fingerprinted(9, 1000.0, 300));  // after the comparison: never its history
  std::vector<std::string> found;
  for (const auto& run : load_history(f.db, {a}, {b})) found.push_back(run.record.id);
  std::reverse(found.begin(), found.end());
  CHECK(found == expected);
  CHECK(load_history(f.db, {a}, {b}, {.limit = 2}).size() == 2);
}

TEST_CASE("the same spec on the same environment reproduces bit for bit under strict determinism") {
  Fixture f;
  const RunData a = f.add(fingerprinted(1, 1000.0, 0));
  FakeRun repeat = fingerprinted(2, 1000.0, 100);
  repeat.loss = a.loss;  // same training, other timing
  const auto comparison = compare_runs({a}, {f.add(repeat)}, {});
  CHECK(comparison.reproducibility.required);
  CHECK(comparison.reproducibility.identical);
  CHECK_THAT(comparison.reproducibility.reason, Catch::StartsWith("bitwise identical: 2 runs"));
  const MetricRow* loss = row_of(comparison, "final_train_loss");
  CHECK(loss->exact);
  CHECK(loss->verdict.status == Status::ok);
}

TEST_CASE("a strict rerun whose loss differs on rank 1 is a reproducibility regression naming step and rank") {
  Fixture f;
  const auto two_ranks = [&](const FakeRun& run, std::optional<std::int64_t> bump) {
    const auto record = testing::write_run(f.db, run);
    std::vector<store::MetricPoint> points;
    for (size_t i = 0; i < run.loss.size(); ++i) {
      const auto step = static_cast<std::int64_t>(i + 1);
      points.push_back({1, step, "loss", run.loss[i] * 1.01 + (bump && step >= *bump ? 1e-3 : 0.0)});
    }
    f.db.append_metrics(record.id, points);
    return load_run(f.db, *f.db.run(record.id));
  };
  const FakeRun run = fingerprinted(1, 1000.0, 0);
  FakeRun again = run;
  again.start_offset_s = 100;
  const auto comparison = compare_runs({two_ranks(run, std::nullopt)}, {two_ranks(again, 12)}, {});
  CHECK_FALSE(comparison.reproducibility.identical);
  CHECK(comparison.reproducibility.step == 12);
  CHECK(comparison.reproducibility.rank == 1);
  CHECK(comparison.outcome == Outcome::regression);
  CHECK(comparison.regressions.front() == "reproducibility");
  CHECK(comparison.verdict_line() == "reproducibility regression: first difference at step 12 on rank 1");
  CHECK(exit_code(comparison.outcome) == 3);
}

TEST_CASE("an evaluation metric that differs bitwise under strict determinism is a regression") {
  Fixture f;
  const RunData a = f.add(fingerprinted(1, 1000.0, 0));
  FakeRun other = fingerprinted(1, 1000.0, 100);
  other.eval_accuracy = 0.8500001;  // far inside -0.5pp, but not the same bits
  const auto comparison = compare_runs({a}, {f.add(other)}, {});
  CHECK(row_of(comparison, "eval_accuracy")->verdict.status == Status::regression);
  CHECK(comparison.reproducibility.metrics == std::vector<std::string>{"eval_accuracy"});
  CHECK_THAT(
      comparison.verdict_line(),
      Catch::StartsWith("reproducibility regression: eval_accuracy differs bitwise; regression in eval_accuracy"));
}

TEST_CASE("relaxed determinism or another environment keeps the usual thresholds for correctness metrics") {
  Fixture f;
  FakeRun relaxed = fingerprinted(1, 1000.0, 0);
  relaxed.spec["determinism"] = "relaxed";
  FakeRun relaxed_again = relaxed;
  relaxed_again.start_offset_s = 100;
  relaxed_again.eval_accuracy = 0.8500001;
  const auto comparison = compare_runs({f.add(relaxed)}, {f.add(relaxed_again)}, {});
  CHECK_FALSE(comparison.reproducibility.required);
  CHECK(row_of(comparison, "eval_accuracy")->verdict.status == Status::ok);
  CHECK_FALSE(row_of(comparison, "eval_accuracy")->exact);
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
