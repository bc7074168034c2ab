// The recorder turns records into stored metrics off the supervisor's thread, keeps NaN as a
// value, buffers while another process holds the store, and reports other store failures.
#include <sqlite3.h>

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "expctl/run/recorder.hpp"
#include "expctl/store/testing.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl;
using nlohmann::json;

struct Fixture {
  test::TempDir dir;
  std::filesystem::path db_path = dir / "results" / "expctl.db";
  store::Store db = store::Store::open(db_path);
  store::RunRecord run;
  run::Console console{true};

  Fixture() {
    db.put_spec(std::string(64, 'a'), "{}", "recorder");
    run = db.create_run({std::string(64, 'a'), std::nullopt, "recorder", std::nullopt});
  }
};

std::string step_record(std::int64_t step, double loss) {
  train::StepMetrics metrics;
  metrics.step = step;
  metrics.loss = loss;
  metrics.lr = 0.1;
  metrics.step_time_s = 0.002;
  metrics.comm_wait_s = 0.0005;
  metrics.samples_per_sec = 1000.0;
  return train::encode_step(metrics).dump();
}

/// Another process's write lock, held until destroyed (BEGIN IMMEDIATE on its own connection).
class HeldLock {
 public:
  explicit HeldLock(const std::filesystem::path& path) {
    REQUIRE(sqlite3_open(path.c_str(), &m_db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(m_db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~HeldLock() {
    sqlite3_exec(m_db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(m_db);
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

 private:
  sqlite3* m_db = nullptr;
};

}  // namespace

TEST_CASE("recorder: step records become per-step metrics of their rank, NaN kept as a value", "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    recorder.on_record(0, step_record(1, 2.5));
    recorder.on_record(1, step_record(1, 2.25));
    recorder.on_record(0, step_record(2, std::numeric_limits<double>::quiet_NaN()));
    recorder.on_record(1, "not json at all");
    recorder.drain();
    const auto divergence = recorder.divergence();
    REQUIRE(divergence.has_value());
    CHECK(divergence->step == 2);
    CHECK(divergence->losses.size() == 1);
    CHECK(divergence->losses.count(0) == 1);
  }
  const auto losses = f.db.metrics(f.run.id, {.name = "loss", .rank = 0});
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].value == 2.5);
  CHECK(std::isnan(losses[1].value));
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 1}).size() == 1);
  const auto times = f.db.metrics(f.run.id, {.name = "step_time_ms", .rank = 0});
  REQUIRE(times.size() == 2);
  CHECK(times[0].value == Approx(2.0));  // seconds in the record, milliseconds in the store
}

TEST_CASE("recorder: a store locked by another process delays writes and loses nothing", "[run][recorder]") {
  Fixture f;
  run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
  {
    HeldLock lock(f.db_path);
    for (int step = 1; step <= 200; ++step) {
      recorder.on_record(0, step_record(step, 1.0 / step));  // returns at once: nothing blocks here
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    CHECK_FALSE(recorder.fatal_error().has_value());
  }
  recorder.drain();
  CHECK_FALSE(recorder.fatal_error().has_value());
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 0}).size() == 200);
}

TEST_CASE("recorder: a full disk is a fatal error reported to the supervisor and never thrown at it",
          "[run][recorder]") {
  Fixture f;
  store::testing::limit_database_pages(f.db, 40);
  run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
  for (int step = 1; step <= 20000 && !recorder.fatal_error(); ++step) {
    REQUIRE_NOTHROW(recorder.on_record(0, step_record(step, 1.0)));
    if (step % 2000 == 0) {
      recorder.drain();
    }
  }
  REQUIRE(recorder.fatal_error().has_value());
  CHECK_THAT(*recorder.fatal_error(), Catch::Contains("no space left on device"));
  CHECK_NOTHROW(recorder.on_record(0, step_record(20001, 1.0)));
  CHECK_THROWS_WITH(recorder.throw_if_fatal(), Catch::Contains("no space left on device"));
}

TEST_CASE("recorder: a checkpoint record becomes an artifact relative to the run folder", "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    recorder.on_record(0, json{{"t", "checkpoint"},
                               {"path", (f.run.run_dir / "checkpoints" / "rank0-step5.pt").string()},
                               {"step", 5},
                               {"sha256", std::string(64, 'b')},
                               {"size_bytes", 123}}
                              .dump());
  }
  const auto artifacts = f.db.artifacts(f.run.id);
  REQUIRE(artifacts.size() == 1);
  CHECK(artifacts[0].path == "checkpoints/rank0-step5.pt");
  CHECK(artifacts[0].size_bytes == 123);
}
