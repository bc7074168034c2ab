// The store's bulk reads that compare uses for long runs: every rank's series as columns, and
// per-rank aggregates computed by SQLite.
#include <cmath>
#include <limits>

#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"

namespace expctl::store {
namespace {

struct Fixture {
  test::TempDir dir;
  Store db = Store::open(dir / "expctl.db");
  std::string run_id = compare::testing::write_run(db, {}).id;
};

TEST_CASE("series_columns returns every rank's points of one series in rank and step order") {
  Fixture f;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  f.db.append_metrics(
      f.run_id,
      std::vector<MetricPoint>{
          {1, 2, "x", 20}, {0, 1, "x", 1}, {1, 1, "x", 10}, {0, 2, "x", nan}, {0, 3, "x", 3}, {0, 1, "y", 99}});
  const auto ranks = f.db.series_columns(f.run_id, "x");
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[0].steps == std::vector<std::int64_t>{1, 2, 3});
  CHECK(ranks[0].values[0] == 1);
  CHECK(std::isnan(ranks[0].values[1]));
  CHECK(ranks[1].steps == std::vector<std::int64_t>{1, 2});
  CHECK(ranks[1].values == std::vector<double>{10, 20});
  const auto after = f.db.series_columns(f.run_id, "x", 1);
  CHECK(after[0].steps == std::vector<std::int64_t>{2, 3});
  CHECK(f.db.series_columns(f.run_id, "missing").empty());
}

TEST_CASE("series_aggregates sums counts and bounds each rank in SQL and leaves NaN out") {
  Fixture f;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  f.db.append_metrics(f.run_id, std::vector<MetricPoint>{
                                    {0, 1, "x", 1}, {0, 2, "x", nan}, {0, 3, "x", 5}, {1, 1, "x", 7}, {1, 5, "x", -2}});
  const auto ranks = f.db.series_aggregates(f.run_id, "x");
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].count == 2);
  CHECK(ranks[0].nan_count == 1);
  CHECK(ranks[0].sum == 6);
  CHECK(ranks[0].min == 1);
  CHECK(ranks[0].max == 5);
  CHECK(ranks[0].first_step == 1);
  CHECK(ranks[0].last_step == 3);
  CHECK(ranks[1].sum == 5);
  CHECK(f.db.series_aggregates(f.run_id, "x", 1)[1].count == 1);
}

TEST_CASE("load_runs loads several runs at once, each as load_run does, in the records' order") {
  test::TempDir dir;
  Store db = Store::open(dir / "expctl.db");
  std::vector<RunRecord> records;
  for (int r = 0; r < 7; ++r) {
    compare::testing::FakeRun run;
    for (int step = 1; step <= 50; ++step) {
      run.loss.push_back(1.0 / (step + r));
      run.throughput.push_back(100.0 + r * 10 + step % 3);
    }
    run.start_offset_s = r;
    records.push_back(compare::testing::write_run(db, run));
  }
  const auto together = compare::load_runs(db, records);
  REQUIRE(together.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    INFO("run " << i);
    const auto alone = compare::load_run(db, records[i]);
    CHECK(together[i].record.id == records[i].id);
    CHECK(together[i].loss == alone.loss);
    CHECK(together[i].loss_steps == alone.loss_steps);
    CHECK(together[i].samples == alone.samples);
    CHECK(together[i].summary == alone.summary);
    CHECK(together[i].spec == alone.spec);
  }
  CHECK(compare::load_runs(db, {}).empty());
}

}  // namespace
}  // namespace expctl::store
