// The summary from stored metrics: compare's per-step samples and warm-up rule, one implementation
// of loss_curve_sha256.
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/run/summary.hpp"

using namespace expctl;

TEST_CASE("summary: throughput sums ranks, step time takes the slowest rank, warm-up left out", "[run][summary]") {
  test::TempDir dir;
  auto db = store::Store::open(dir / "expctl.db");
  db.put_spec(std::string(64, 'c'), "{}", "summary");
  const auto run = db.create_run({std::string(64, 'c'), std::nullopt, "summary", std::nullopt});
  std::vector<store::MetricPoint> points;
  std::vector<double> losses;
  for (int step = 1; step <= 40; ++step) {
    const double loss = 2.0 / step;
    losses.push_back(loss);
    for (int rank = 0; rank < 2; ++rank) {
      points.push_back({rank, step, "loss", loss + rank});
      points.push_back({rank, step, "samples_per_sec", step <= 4 ? 1.0 : 100.0 + rank});
      points.push_back({rank, step, "step_time_ms", rank == 0 ? 10.0 : 12.0});
      points.push_back({rank, step, "comm_wait_ms", rank == 0 ? 1.0 : 3.0});
      points.push_back({rank, step, "skipped", step == 7 ? 1.0 : 0.0});
      points.push_back({rank, step, "backward_ms", rank == 0 ? 4.0 : 6.0});
    }
  }
  db.append_metrics(run.id, points);
  const auto summary = compare::to_json(run::compute_summary(db, run.id, {}, 3.0, 0.5));
  CHECK(summary.at("steps") == 40);
  CHECK(summary.at("warmup_steps") == compare::default_warmup_steps(40));
  CHECK(summary.at("samples_per_sec").get<double>() == Approx(201.0));
  CHECK(summary.at("step_time_ms_p50").get<double>() == Approx(12.0));
  CHECK(summary.at("comm_wait_fraction").get<double>() == Approx(4.0 / 22.0));
  CHECK(summary.at("skipped_steps") == 1);
  CHECK(summary.at("ranks_recorded") == 2);
  CHECK(summary.at("final_train_loss").get<double>() == Approx(2.0 / 40));
  CHECK(summary.at("loss_curve_sha256") == compare::loss_curve_sha256(losses));
  // The phase rows compare and show read instead of summing every step again.
  const auto phases = compare::phases_from_json(summary);
  REQUIRE(phases);
  REQUIRE(phases->size() == 2);
  CHECK((*phases)[0].shares.backward.value() == Approx(0.4));
  CHECK((*phases)[1].shares.backward.value() == Approx(0.5));
  CHECK((*phases)[1].shares.comm.value() == Approx(0.25));
  const auto again =
      compare::to_json(run::compute_summary(db, run.id, compare::summary_from_json(summary), 2.0, std::nullopt));
  CHECK(again.at("invocations") == 2);
  CHECK(again.at("wall_time_s").get<double>() == Approx(5.0));
  CHECK(again.at("time_to_first_step_s").get<double>() == Approx(0.5));
}
