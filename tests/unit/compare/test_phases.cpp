// Where each rank's step time went: the rows from SQL sums over the stored phase series, the JSON
// the runner's summary keeps, and the reader that prefers that summary (so compare over 100k-step
// runs never sums millions of rows).
#include <cmath>
#include <limits>

#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/phases.hpp"

namespace expctl::compare {
namespace {

using nlohmann::json;

// Two ranks, 10 steps: rank 1 spends twice as long in backward and carries straggler scores.
void append_phases(store::Store& db, const std::string& run_id) {
  std::vector<store::MetricPoint> points;
  for (int step = 1; step <= 10; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      points.push_back({rank, step, "step_time_ms", 10.0});
      points.push_back({rank, step, "data_wait_ms", 1.0});
      points.push_back({rank, step, "forward_ms", 2.0});
      points.push_back({rank, step, "backward_ms", rank == 0 ? 3.0 : 6.0});
      points.push_back({rank, step, "comm_wait_ms", 0.5});
      points.push_back({rank, step, "optimizer_ms", 1.0});
      points.push_back({rank, step, k_straggler_series, rank == 0 ? 0.8 : 1.0 + step / 10.0});
    }
  }
  db.append_metrics(run_id, points);
}

struct Fixture {
  test::TempDir dir;
  store::Store db = store::Store::open(dir / "expctl.db");
  store::RunRecord run = testing::write_run(db, {});
  Fixture() { append_phases(db, run.id); }
  store::RunRecord reread() const { return db.run(run.id).value(); }
};

TEST_CASE("phase_breakdown: shares of step time per rank, the rest as other, straggler mean and max") {
  Fixture f;
  const auto rows = phase_breakdown(f.db, f.run.id);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].rank == 1);
  CHECK(rows[1].steps == 10);
  CHECK(rows[1].step_time_ms == Approx(10.0));
  CHECK(rows[0].shares.backward.value() == Approx(0.3));
  CHECK(rows[1].shares.backward.value() == Approx(0.6));
  CHECK(rows[1].other.value() == Approx(0.0).margin(1e-12));  // 0.1 + 0.2 + 0.6 + 0.05 + 0.1 > 1: clamped
  CHECK(rows[0].other.value() == Approx(1.0 - 0.1 - 0.2 - 0.3 - 0.05 - 0.1));
  CHECK(*rows[1].straggler_mean == Approx(1.55));
  CHECK(*rows[1].straggler_max == Approx(2.0));
}

TEST_CASE("phase_breakdown: a phase no rank timed is not measured (null), not 0 %, and other is unknown") {
  // A program's run: step times from its timestamps, no phase timers unless it logs them.
  test::TempDir dir;
  auto db = store::Store::open(dir / "expctl.db");
  const auto run = testing::write_run(db, {});
  std::vector<store::MetricPoint> points;
  for (int step = 1; step <= 5; ++step) {
    points.push_back({0, step, "step_time_ms", 10.0});
    points.push_back({0, step, "forward_ms", 4.0});  // the program logs one phase of its own
    points.push_back({1, step, "step_time_ms", 10.0});
  }
  db.append_metrics(run.id, points);
  const auto rows = phase_breakdown(db, run.id);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].shares.forward.value() == Approx(0.4));
  CHECK_FALSE(rows[0].shares.backward);
  CHECK_FALSE(rows[0].other);  // 60 % is not "other" when backward, comm, ... were never timed
  CHECK(rows[0].shares.any());
  CHECK_FALSE(rows[1].shares.any());
  const json document = phases_json(rows);
  CHECK(document[1].at("shares").at("comm").is_null());
  CHECK(document[1].at("shares").at("other").is_null());
  const auto back = phases_from_json(json{{"phases", document}});
  REQUIRE(back);
  CHECK_FALSE((*back)[1].shares.comm);
  CHECK((*back)[0].shares.forward.value() == Approx(0.4));
}

TEST_CASE("phases_json and phases_from_json round-trip every field, a missing score stays missing") {
  Fixture f;
  auto rows = phase_breakdown(f.db, f.run.id);
  rows[0].straggler_mean.reset();
  rows[0].straggler_max.reset();
  const json summary = {{"phases", phases_json(rows)}};
  const auto back = phases_from_json(json::parse(summary.dump()));
  REQUIRE(back);
  REQUIRE(back->size() == 2);
  CHECK_FALSE((*back)[0].straggler_mean);
  CHECK((*back)[1].straggler_max == rows[1].straggler_max);
  CHECK((*back)[1].shares.backward == rows[1].shares.backward);
  CHECK((*back)[0].other == rows[0].other);
  CHECK((*back)[1].steps == 10);
  CHECK_FALSE(phases_from_json(json::object()));
  CHECK_FALSE(phases_from_json(json{{"phases", json::array({{{"rank", 0}}})}}));  // malformed: not trusted
}

TEST_CASE("run_phases reads the summary's rows when it has them and the stored series when it does not") {
  Fixture f;
  CHECK(run_phases(f.db, f.run.id, json::parse(f.reread().summary_json))[1].shares.backward ==
        Approx(0.6));  // no phases in the summary
  auto rows = phase_breakdown(f.db, f.run.id);
  rows[1].shares.backward = 0.25;  // differs from the series: proves which one was read
  json summary = json::parse(f.reread().summary_json);
  summary["phases"] = phases_json(rows);
  f.db.set_summary(f.run.id, summary.dump());
  CHECK(run_phases(f.db, f.run.id, summary)[1].shares.backward.value() == Approx(0.25));
  CHECK(load_run(f.db, f.reread()).phases[1].shares.backward.value() == Approx(0.25));
}

TEST_CASE("straggler_timeline: the worst rank per step, in step order, load_run reads it only when asked") {
  Fixture f;
  const auto timeline = straggler_timeline(f.db, f.run.id);
  REQUIRE(timeline.steps.size() == 10);
  CHECK(timeline.steps.front() == 1);
  CHECK(timeline.steps.back() == 10);
  CHECK(timeline.scores.front() == Approx(1.1));
  CHECK(timeline.scores.back() == Approx(2.0));
  CHECK(load_run(f.db, f.reread()).straggler.steps.size() == 10);
  CHECK(load_run(f.db, f.reread(), {.straggler_timeline = false}).straggler.steps.empty());
}

}  // namespace
}  // namespace expctl::compare
