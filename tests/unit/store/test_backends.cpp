// The store's contract, written once and run against every backend (backend_fixture.hpp).
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include "backend_fixture.hpp"
#include <fmt/format.h>

#include "expctl/store/run_listing.hpp"
#include "expctl/store/run_query.hpp"

using namespace expctl;
using store::MetricPoint;
using store::RunStatus;
using test::BackendStore;
namespace fs = std::filesystem;

namespace {

const std::string& k_spec = test::k_contract_spec;
const std::string& k_hash = test::k_contract_hash;

store::RunRecord new_run(store::Store& db, const std::string& name = "quickstart") {
  db.put_spec(k_hash, k_spec, "quickstart");
  return db.create_run(store::NewRun{k_hash, std::nullopt, name, std::nullopt});
}

/// Equal, or both NaN. The sign of a zero is not compared: SQLite stores an integral REAL as an
/// integer, so -0.0 reads back as 0.0 there (PostgreSQL keeps it; no metric means anything by it).
bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

}  // namespace

TEMPLATE_TEST_CASE("store contract: specs and environments round-trip, a known hash keeps its first record",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  db.put_spec(k_hash, k_spec, "quickstart");
  db.put_spec(k_hash, "{}", "other");
  REQUIRE(db.spec(k_hash).has_value());
  CHECK(db.spec(k_hash)->canonical == k_spec);
  CHECK(db.spec(k_hash)->name == "quickstart");
  CHECK_FALSE(db.spec(util::sha256_hex("nope")).has_value());
  db.put_environment("env1", R"({"host":"node1"})");
  db.put_environment("env1", R"({"host":"other"})");
  CHECK(db.environment("env1") == std::optional<std::string>(R"({"host":"node1"})"));
  CHECK_FALSE(db.environment("env2").has_value());
  CHECK(db.schema_version() >= 1);
}

TEMPLATE_TEST_CASE("store contract: a run's life: created running with its folder under the runs root, found, "
                   "tagged, finished, resumed",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  const auto run = new_run(db, "first");
  // The runs root is a setting of its own: here dir/runs, not beside the database (results/).
  CHECK(run.run_dir == fs::absolute(where.dir / "runs" / run.id));
  CHECK(fs::exists(run.run_dir / "spec.json"));
  CHECK(db.runs_dir() == fs::absolute(where.dir / "runs"));
  CHECK(run.status == RunStatus::running);

  const auto second = new_run(db, "second");
  const auto listed = db.list_runs();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].id == second.id);  // newest first
  CHECK(listed[1].run_dir == run.run_dir);
  CHECK(db.find_run(run.id.substr(0, run.id.size() - 1)).id == run.id);
  CHECK_THROWS_WITH(db.find_run("2"), Catch::Contains("is ambiguous: it matches 2 runs"));
  CHECK_THROWS_WITH(db.find_run("x"), Catch::Contains("no run matches \"x\""));

  db.add_tag(run.id, "baseline");
  db.add_tag(run.id, "a-tag");
  db.add_tag(run.id, "baseline");
  CHECK(db.run(run.id)->tags == std::vector<std::string>{"a-tag", "baseline"});
  CHECK(db.list_runs({.tag = "baseline"}).size() == 1);
  CHECK(db.remove_tag(run.id, "a-tag"));
  CHECK_FALSE(db.remove_tag(run.id, "a-tag"));
  CHECK(db.list_runs({.spec_hash_prefix = k_hash.substr(0, 8)}).size() == 2);
  CHECK(db.list_runs({.limit = 1}).size() == 1);

  db.add_rank(run.id, {.rank = 0, .host = "node1", .pid = 42});
  db.add_rank(run.id, {.rank = 1, .host = "node1"});
  db.update_rank(run.id, 1, RunStatus::failed, 1, 9);
  db.add_artifact(run.id, {"checkpoints/step-2.pt", std::string(64, 'a'), 10});
  db.add_artifact(run.id, {"checkpoints/step-2.pt", std::string(64, 'b'), 11});
  CHECK(db.artifacts(run.id).size() == 1);
  CHECK(db.artifacts(run.id)[0].size_bytes == 11);
  db.set_summary(run.id, R"({"steps":2})");
  db.finish_run(run.id, RunStatus::failed, 1, "rank 1 died");
  const auto finished = db.run(run.id).value();
  CHECK(finished.status == RunStatus::failed);
  CHECK(finished.root_cause == "rank 1 died");
  CHECK(finished.summary_json == R"({"steps":2})");
  CHECK(finished.exit_code == 1);
  const auto ranks = db.ranks(run.id);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].status == RunStatus::lost);  // left running in a run that ended
  CHECK(ranks[0].pid == 42);
  CHECK(ranks[1].signal == 9);
  CHECK(db.list_runs({.status = RunStatus::failed}).size() == 1);
  CHECK(db.list_runs({.status = RunStatus::running}).size() == 1);

  db.resume_run(run.id);
  CHECK(db.run(run.id)->status == RunStatus::running);
  CHECK_THROWS_WITH(db.resume_run(run.id), Catch::Contains("only an interrupted, failed, diverged or lost run"));
  CHECK_THROWS_WITH(db.heartbeat("nope"), Catch::Contains("no run \"nope\""));
}

TEMPLATE_TEST_CASE(
    "store contract: a queued run is owned by nobody until its job starts it, waits again when "
    "requeued, and is never resumed or finished by hand",
    "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  db.put_spec(k_hash, k_spec, "quickstart");
  db.put_environment("node-env", R"({"host":"node7"})");
  const auto queued = db.create_run({.spec_hash = k_hash, .name = "slurm", .queued = true});
  CHECK(queued.status == RunStatus::queued);
  CHECK(fs::exists(queued.run_dir / "spec.json"));
  auto read = db.run(queued.id).value();
  CHECK(read.status == RunStatus::queued);  // no owner: never derived lost
  CHECK_FALSE(read.owner.has_value());
  CHECK_FALSE(read.heartbeat_at.has_value());
  CHECK_FALSE(read.environment_hash.has_value());
  CHECK(db.list_runs({.status = RunStatus::queued}).size() == 1);
  CHECK(db.list_runs({.status = RunStatus::running}).empty());
  CHECK_THROWS_WITH(db.resume_run(queued.id), Catch::Contains("is queued: the scheduler's job starts it"));
  CHECK_THROWS_WITH(db.finish_run(queued.id, RunStatus::queued, 0, ""), Catch::Contains("needs an end status"));

  db.start_queued_run(queued.id, std::string("node-env"));
  read = db.run(queued.id).value();
  CHECK(read.status == RunStatus::running);
  CHECK(read.owner.has_value());
  CHECK(read.environment_hash == std::optional<std::string>("node-env"));
  CHECK_THROWS_WITH(db.start_queued_run(queued.id, std::nullopt), Catch::Contains("is running, not queued"));

  db.queue_run(queued.id, "preempted at step 150: Slurm requeued job 42");
  read = db.run(queued.id).value();
  CHECK(read.status == RunStatus::queued);
  CHECK(read.root_cause == "preempted at step 150: Slurm requeued job 42");
  CHECK_FALSE(read.owner.has_value());
  db.start_queued_run(queued.id, std::nullopt);  // a restart keeps the fingerprint it started with
  read = db.run(queued.id).value();
  CHECK(read.environment_hash == std::optional<std::string>("node-env"));
  CHECK(read.root_cause.empty());
  db.finish_run(queued.id, RunStatus::completed, 0, "");
  CHECK_THROWS_WITH(db.queue_run(queued.id, "again"), Catch::Contains("a completed run is never queued again"));
  CHECK_THROWS_WITH(db.queue_run("20260101-000000-000000", "x"), Catch::Contains("no run"));
}

TEMPLATE_TEST_CASE("store contract: NaN, ±Inf, extreme doubles, 64-bit steps and Unicode names read back as written",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  const auto run = new_run(db);
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {nan, inf, -inf, 0.1, 1.0 / 3.0, -0.0, std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::denorm_min(), -1e-300};
  const std::vector<std::int64_t> steps = {std::numeric_limits<std::int64_t>::min() + 1, -1, 0, (1LL << 53) + 1,
                                           std::numeric_limits<std::int64_t>::max()};
  const std::string unicode = "損失/γ-λ 🚀";
  std::vector<MetricPoint> points;
  for (std::size_t i = 0; i < values.size(); ++i) {
    points.push_back({0, static_cast<std::int64_t>(i), "loss", values[i]});
  }
  for (const auto step : steps) {
    points.push_back({1, step, unicode, static_cast<double>(step % 1000)});
  }
  db.append_metrics(run.id, points);

  const auto loss = db.metrics(run.id, {.name = "loss"});
  REQUIRE(loss.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("value " << i);
    CHECK(same_value(loss[i].value, values[i]));
  }
  const auto named = db.metrics(run.id, {.name = unicode});
  REQUIRE(named.size() == steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CHECK(named[i].step == steps[i]);
    CHECK(named[i].name == unicode);
    CHECK(named[i].rank == 1);
  }
  const auto columns = db.series_columns(run.id, "loss");
  REQUIRE(columns.size() == 1);
  CHECK(std::isnan(columns[0].values[0]));
  CHECK(columns[0].values[1] == inf);
  CHECK(columns[0].values[2] == -inf);
  const auto recent = db.recent_metrics(run.id, "loss", 0, 3);
  REQUIRE(recent.size() == 3);
  CHECK(recent.back().step == static_cast<std::int64_t>(values.size()) - 1);
  CHECK(db.recent_metrics(run.id, unicode, 1, 1).at(0).step == std::numeric_limits<std::int64_t>::max());

  // Aggregates count NaN apart and leave it out of sum, min and max (±Inf are numbers).
  const auto aggregates = db.series_aggregates(run.id, "loss", 2);  // steps 3.. : finite values only
  REQUIRE(aggregates.size() == 1);
  CHECK(aggregates[0].count == static_cast<std::int64_t>(values.size()) - 3);
  CHECK(aggregates[0].nan_count == 0);
  CHECK(aggregates[0].max == std::numeric_limits<double>::max());
  const auto with_nan = db.series_aggregates(run.id, "loss");
  CHECK(with_nan[0].nan_count == 1);
  CHECK(with_nan[0].count == static_cast<std::int64_t>(values.size()) - 1);
  CHECK(with_nan[0].max == inf);
  CHECK(with_nan[0].min == -inf);

  const auto series = db.metric_series(run.id);
  REQUIRE(series.size() == 2);
  CHECK(series[0].name == "loss");
  CHECK(std::isnan(series[0].first_value));
  CHECK(series[1].name == unicode);
  CHECK(series[1].last_step == std::numeric_limits<std::int64_t>::max());
  // The names alone, as metric_series has them; a name other runs logged is not this run's.
  CHECK(db.metric_names(run.id) == std::vector<std::string>{series[0].name, series[1].name});
  const auto quiet = new_run(db);
  db.append_metrics(quiet.id, std::vector<MetricPoint>{{0, 1, "only here", 1.0}});
  CHECK(db.metric_names(quiet.id) == std::vector<std::string>{"only here"});
  CHECK(db.metric_names(run.id).size() == 2);

  // A point given again replaces the stored one (a resumed run re-logs its steps).
  db.append_metrics(run.id, std::vector<MetricPoint>{{0, 1, "loss", 5.0}, {0, 1, "loss", 6.0}});
  CHECK(db.metrics(run.id, {.name = "loss"})[1].value == 6.0);
  CHECK(db.metrics(run.id).size() == values.size() + steps.size());
}

TEMPLATE_TEST_CASE(
    "store contract: open_reader is a read-only connection of its own that sees what the store "
    "wrote, from another thread",
    "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  const auto run = new_run(db);
  db.append_metrics(run.id, std::vector<MetricPoint>{{0, 1, "loss", 0.5}, {1, 1, "loss", 0.25}});
  auto reader = db.open_reader();
  REQUIRE(reader.has_value());
  CHECK(reader->location() == db.location());
  CHECK(reader->runs_dir() == db.runs_dir());
  CHECK(reader->schema_version() == db.schema_version());
  // Written after the reader opened: a connection, not a snapshot taken at open.
  db.append_metrics(run.id, std::vector<MetricPoint>{{0, 2, "loss", 0.125}});
  std::vector<store::SeriesColumns> read;
  std::thread([&] { read = reader->series_columns(run.id, "loss"); }).join();
  REQUIRE(read.size() == 2);
  CHECK(read[0].values == std::vector<double>{0.5, 0.125});
  CHECK(read[1].values == std::vector<double>{0.25});
  // Refused: by the server (a read-only session), or by the SQLite connection's own check that a
  // store opened read-only is never written (a programmer's error there, not the user's).
  CHECK_THROWS_AS(reader->add_tag(run.id, "written-by-a-reader"), util::Failure);
  CHECK(db.run(run.id)->tags.empty());
}

TEMPLATE_TEST_CASE("store contract: concurrent writers each on their own connection lose nothing and never share an id",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  { new_run(*std::make_unique<store::Store>(where.open())); }  // the schema exists before the writers start
  constexpr int k_writers = 4;
  constexpr int k_runs = 5;
  constexpr int k_steps = 200;
  std::vector<std::thread> writers;
  std::vector<std::string> failures(k_writers);
  for (int w = 0; w < k_writers; ++w) {
    writers.emplace_back([&, w] {
      try {
        auto db = where.open();
        for (int r = 0; r < k_runs; ++r) {
          const auto run = new_run(db, "writer" + std::to_string(w));
          std::vector<MetricPoint> points;
          for (int step = 0; step < k_steps; ++step) {
            points.push_back({w % 2, step, "loss", step * 0.5});
          }
          db.append_metrics(run.id, points);
          db.finish_run(run.id, RunStatus::completed, 0, "");
        }
      } catch (const std::exception& error) {
        failures[w] = error.what();
      }
    });
  }
  for (auto& writer : writers) {
    writer.join();
  }
  for (const auto& failure : failures) {
    CHECK(failure.empty());
  }
  auto db = where.open(store::OpenMode::read_only);
  const auto runs = db.list_runs({.status = RunStatus::completed});
  CHECK(runs.size() == k_writers * k_runs);
  std::set<std::string> ids;
  for (const auto& run : runs) {
    ids.insert(run.id);
    CHECK(db.metrics(run.id).size() == k_steps);
  }
  CHECK(ids.size() == runs.size());
}

TEMPLATE_TEST_CASE("store contract: a store written by a newer expctl is refused in one line and left unchanged",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  { new_run(*std::make_unique<store::Store>(where.open())); }
  const int newer = where.open().schema_version() + 1;
  where.execute(TestType::kind == store::StoreKind::sqlite
                    ? "PRAGMA user_version = " + std::to_string(newer)
                    : "UPDATE expctl_schema SET version = " + std::to_string(newer));
  for (const auto mode : {store::OpenMode::read_write, store::OpenMode::read_only}) {
    try {
      where.open(mode);
      FAIL("a newer store was opened");
    } catch (const util::StoreError& error) {
      const std::string message = error.what();
      CHECK_THAT(message, Catch::Contains("written by a newer expctl (schema v" + std::to_string(newer)) &&
                              Catch::EndsWith("upgrade expctl"));
      CHECK(message.find('\n') == std::string::npos);
      CHECK(error.exit_code() == util::ExitCode::usage);
    }
  }
  where.execute(TestType::kind == store::StoreKind::sqlite
                    ? "PRAGMA user_version = " + std::to_string(newer - 1)
                    : "UPDATE expctl_schema SET version = " + std::to_string(newer - 1));
  CHECK(where.open(store::OpenMode::read_only).list_runs().size() == 1);
}

TEST_CASE("store locations: paths and sqlite: are SQLite, URLs and libpq keyword strings are PostgreSQL") {
  using store::StoreKind;
  CHECK(store::parse_store_location("results/expctl.db").kind == StoreKind::sqlite);
  CHECK(store::parse_store_location("sqlite:/tmp/x.db").target == "/tmp/x.db");
  CHECK(store::parse_store_location("postgresql://db.example/expctl").kind == StoreKind::postgresql);
  CHECK(store::parse_store_location("postgres://u@db/expctl").kind == StoreKind::postgresql);
  CHECK(store::parse_store_location("service=team").kind == StoreKind::postgresql);
  CHECK(store::parse_store_location("host=/tmp dbname=x").kind == StoreKind::postgresql);
  CHECK(store::parse_store_location("hostile.db").kind == StoreKind::sqlite);
}

TEST_CASE("store failures are typed: a full SQLite store is `full`, a PostgreSQL server that is not there is "
          "`unreachable` (exit 2, one line naming the fix)") {
  BackendStore where(store::StoreKind::sqlite);
  auto db = where.open();
  const auto run = new_run(db);
  store::testing::limit_database_pages(db, 1);
  std::vector<MetricPoint> points;
  for (int step = 0; step < 5000; ++step) {
    points.push_back({0, step, "loss", 1.0});
  }
  try {
    db.append_metrics(run.id, points);
    FAIL("a full store took the points");
  } catch (const store::Error& error) {
    CHECK(error.kind() == store::FailureKind::full);
  }

  const test::TempDir nowhere;
  try {
    store::Store::open("host=" + nowhere.path().string() + " dbname=expctl user=someone password=hunter2");
    FAIL("connected to no server");
  } catch (const store::Error& error) {
    const std::string message = error.what();
    CHECK(error.kind() == store::FailureKind::unreachable);
    CHECK(error.exit_code() == util::ExitCode::usage);
    CHECK_THAT(message, Catch::StartsWith("postgresql://someone@" + nowhere.path().string() + "/expctl: cannot "
                                          "connect to the PostgreSQL server (") &&
                            Catch::Contains("check the host, port, database and sslmode"));
    CHECK(message.find("hunter2") == std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEMPLATE_TEST_CASE("store contract: a wrong password is refused in one line naming ~/.pgpass, and never shown",
                   "[store][backends]", test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  // scripts/pg-throwaway.sh's role expctl_pw must give the password "right".
  const std::string conninfo = test::test_postgres().value() + " user=expctl_pw password=wrong-secret";
  try {
    store::Store::open(conninfo);
    FAIL("a wrong password was accepted");
  } catch (const store::Error& error) {
    const std::string message = error.what();
    CHECK(error.kind() == store::FailureKind::input);
    CHECK(error.exit_code() == util::ExitCode::usage);
    CHECK_THAT(message, Catch::Contains("the server refused the login") && Catch::Contains("~/.pgpass"));
    CHECK(message.find("wrong-secret") == std::string::npos);
  }
  CHECK(store::Store::open(where.location + " user=expctl_pw password=right", store::OpenMode::read_write,
                          {.runs_root = where.dir / "runs"})
            .schema_version() >= 1);
}

TEMPLATE_TEST_CASE("store contract: remove_run deletes the row with its ranks, metrics, artifacts and tags, then its "
                   "folder, and the store's size is measured",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  const auto kept = new_run(db, "kept");
  const auto gone = new_run(db, "gone");
  fs::create_directories(gone.run_dir / "checkpoints");
  std::ofstream(gone.run_dir / "checkpoints" / "rank0-step2.pt") << std::string(4096, 'x');
  for (const auto& run : {kept, gone}) {
    db.add_rank(run.id, {0, "node1", 100, std::nullopt, RunStatus::running, std::nullopt, std::nullopt});
    std::vector<MetricPoint> points;
    for (int step = 1; step <= 2000; ++step) {
      points.push_back({0, step, "loss", 1.0 / step});
    }
    db.append_metrics(run.id, points);
    db.add_artifact(run.id, {"checkpoints/rank0-step2.pt", std::string(64, 'c'), 4096});
    db.add_tag(run.id, "ab:x");
    db.finish_run(run.id, RunStatus::completed, 0, "");
  }
  const std::int64_t database_before = db.database_bytes();
  CHECK(database_before > 0);
  CHECK(db.folders_bytes() >= 4096);

  CHECK(db.remove_run(gone.id) >= 4096);
  CHECK_FALSE(fs::exists(gone.run_dir));
  CHECK_FALSE(db.run(gone.id).has_value());
  CHECK(db.metrics(gone.id, {}).empty());
  CHECK(db.artifacts(gone.id).empty());
  CHECK(db.ranks(gone.id).empty());
  CHECK(db.list_runs({.tag = "ab:x"}).size() == 1);
  CHECK(db.metrics(kept.id, {}).size() == 2000);  // the other run is untouched
  CHECK(fs::exists(kept.run_dir / "spec.json"));
  CHECK_THROWS_WITH(db.remove_run(gone.id), Catch::Contains("no run \"" + gone.id + "\""));

  CHECK(db.reclaimable_bytes() >= 0);
  db.compact();
  CHECK(db.database_bytes() > 0);
  CHECK(db.run(kept.id).has_value());
}

TEST_CASE(
    "postgres: a run removed while a batch of its points is in flight keeps none of them (the series tables "
    "have no foreign key: the batch holds the run's row)",
    "[store][backends]") {
  BackendStore where(store::StoreKind::postgresql);
  if (!where.available)
    return;
  auto db = where.open();
  const auto run = new_run(db, "in flight");
  db.append_metrics(run.id, std::vector<MetricPoint>{{0, 1, "loss", 1.0}});
  // A batch as the shipper writes one (PgBackend::hold_run, then the points), still open when the
  // run is removed; its session sleeps after the INSERT, so the removal meets a batch in flight.
  const std::string batch = fmt::format(
      "BEGIN; SELECT 1 FROM runs WHERE id = '{0}' FOR KEY SHARE; "
      "INSERT INTO metric_points (run_id, key_id, rank, step, bits) "
      "SELECT '{0}', (SELECT id FROM metric_keys WHERE name = 'loss'), 0, s, 0 FROM generate_series(2, 1001) s; "
      "SELECT pg_sleep(2); COMMIT;",
      run.id);
  std::thread in_flight([&] { store::testing::execute_postgres_sql(where.location, batch); });
  for (int i = 0;
       i < 500 && store::testing::query_postgres(
                      where.location, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'") == "0";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  db.remove_run(run.id);  // waits for the batch, then deletes its points with the run's
  in_flight.join();
  CHECK_FALSE(db.run(run.id).has_value());
  CHECK(store::testing::query_postgres(where.location,
                                       store::testing::postgres_points_sql("run_id = '" + run.id + "'")) == "0");
  // And a batch for a run that is not there is refused whole.
  CHECK_THROWS_WITH(db.append_metrics(run.id, std::vector<MetricPoint>{{0, 5, "loss", 1.0}}),
                    Catch::Contains("no run \"" + run.id + "\""));
  CHECK(store::testing::query_postgres(where.location, store::testing::postgres_points_sql()) == "0");
}

TEMPLATE_TEST_CASE("store contract: the run folders' size counts every folder, a finished run's as measured when it "
                   "ended (SQLite remembers it), a running or resumed run's and an orphan's as they are now",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  const auto grow = [](const fs::path& file, size_t bytes) { std::ofstream(file, std::ios::app) << std::string(bytes, 'x'); };
  const auto finished = new_run(db, "finished");
  const auto running = new_run(db, "running");
  grow(finished.run_dir / "logs.txt", 1000);
  db.finish_run(finished.id, RunStatus::failed, 1, "rank 0 exited 1");
  fs::create_directories(where.dir / "runs" / "20250101-000000-0rphan");
  grow(where.dir / "runs" / "20250101-000000-0rphan" / "left.txt", 300);
  const auto walked = [&] { return store::Store::bytes_under(where.dir / "runs"); };
  CHECK(db.folders_bytes() == walked());
  if (TestType::kind == store::StoreKind::sqlite) {
    where.execute("UPDATE runs SET folder_bytes = NULL");  // as a store from before schema v5
    CHECK(db.folders_bytes() == walked());
    CHECK(db.remember_folder_sizes() == 1);  // gc does this: the finished run, not the running one
    CHECK(db.remember_folder_sizes() == 0);
  }
  CHECK(db.folders_bytes() == walked());

  grow(running.run_dir / "logs.txt", 700);            // a running run's folder is walked
  grow(where.dir / "runs" / "20250101-000000-0rphan" / "left.txt", 50);  // so is an orphan
  CHECK(db.folders_bytes() == walked());

  grow(finished.run_dir / "logs.txt", 500);  // a finished folder does not change in expctl's use
  if (TestType::kind == store::StoreKind::sqlite) {
    CHECK(db.folders_bytes() == walked() - 500);  // remembered at its end
    db.remeasure_folder(finished.id);               // as gc does after it took files away
    CHECK(db.folders_bytes() == walked());
    grow(finished.run_dir / "logs.txt", 200);
    db.resume_run(finished.id);  // forgotten: a resumed run's folder grows again
    CHECK(db.folders_bytes() == walked());
  } else {
    CHECK(db.folders_bytes() == walked());  // PostgreSQL's runs come by shipping: every folder is walked
  }
}

TEMPLATE_TEST_CASE("store contract: orphaned_folders lists old run folders without a row, never a young or hidden one",
                   "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available) return;
  auto db = where.open();
  const auto run = new_run(db);
  const fs::path old_orphan = db.runs_dir() / "20250101-000000-dead01";
  const fs::path young_orphan = db.runs_dir() / "20250101-000000-dead02";
  const fs::path hidden = db.runs_dir() / ".staging-x";
  for (const auto& folder : {old_orphan, young_orphan, hidden}) {
    fs::create_directories(folder);
  }
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(old_orphan, two_hours_ago);
  fs::last_write_time(hidden, two_hours_ago);
  fs::last_write_time(run.run_dir, two_hours_ago);
  CHECK(db.orphaned_folders() == std::vector<fs::path>{old_orphan});
}

TEMPLATE_TEST_CASE(
    "store contract: query_runs filters, counts, sorts and pages in the database, lost and running "
    "told apart",
    "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  db.put_spec(k_hash, k_spec, "quickstart");
  const std::string other_hash = util::sha256_hex("other");
  db.put_spec(other_hash, k_spec, "other");
  // Names whose byte order differs from a locale's ("Beta" < "alpha"): every backend sorts as SQLite does.
  const std::vector<std::string> names = {"alpha", "Beta", "beta-2", "gamma", "alphabet", "delta", "Alpha-3"};
  const auto t0 = store::Clock::now() - std::chrono::hours(10);
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& hash = i == 3 ? other_hash : k_hash;
    ids.push_back(db.create_run({hash, std::nullopt, names[i], t0 + std::chrono::minutes(10 * i)}).id);
  }
  // Ends: 0 completed after 5 h, 1 completed after 1 h, 2 failed after 3 h, 3 completed after 2 h;
  // 4 and 5 stay running (duration: to now, ~9 h and more), 6 is lost (its owner's boot is over).
  const auto finish = [&](std::size_t i, RunStatus status, int hours) {
    db.finish_run(ids[i], status, status == RunStatus::completed ? 0 : 1, "");
    where.execute(fmt::format("UPDATE runs SET ended_at = '{}' WHERE id = '{}'",
                              store::format_utc(t0 + std::chrono::minutes(10 * i) + std::chrono::hours(hours)),
                              ids[i]));
  };
  finish(0, RunStatus::completed, 5);
  finish(1, RunStatus::completed, 1);
  finish(2, RunStatus::failed, 3);
  finish(3, RunStatus::completed, 2);
  where.execute(fmt::format("UPDATE runs SET owner_boot_id = 'a-boot-long-over' WHERE id = '{}'", ids[6]));
  db.add_tag(ids[1], "tenth");
  db.add_tag(ids[4], "tenth");
  db.add_tag(ids[4], "other");

  const auto names_of = [](const store::RunPage& page) {
    std::vector<std::string> out;
    for (const auto& run : page.runs) out.push_back(run.name);
    return out;
  };
  using V = std::vector<std::string>;
  // Default: newest first, a page of 3 with the total of all.
  auto page = store::query_runs(db, {.limit = 3});
  CHECK(page.total == 7);
  CHECK(names_of(page) == V{"Alpha-3", "delta", "alphabet"});
  CHECK(page.runs[0].run_dir == fs::absolute(where.dir / "runs" / ids[6]));
  CHECK(page.runs[0].status == RunStatus::lost);
  page = store::query_runs(db, {.offset = 6, .limit = 3});
  CHECK(page.total == 7);
  CHECK(names_of(page) == V{"alpha"});
  CHECK(store::query_runs(db, {.offset = 50}).runs.empty());
  CHECK(store::query_runs(db, {.limit = 0}).runs.size() == 7);  // 0: no limit

  CHECK(names_of(store::query_runs(db, {.sort = store::RunSort::name, .descending = false, .limit = 0})) ==
        V{"Alpha-3", "Beta", "alpha", "alphabet", "beta-2", "delta", "gamma"});
  CHECK(names_of(store::query_runs(db, {.sort = store::RunSort::name, .offset = 1, .limit = 2})) ==
        V{"delta", "beta-2"});
  CHECK(names_of(store::query_runs(db, {.sort = store::RunSort::duration, .descending = false, .limit = 4})) ==
        V{"Beta", "gamma", "beta-2", "alpha"});
  // Stored status order: completed < failed < running (a lost run is stored as running).
  page = store::query_runs(db, {.sort = store::RunSort::status, .descending = false, .limit = 0});
  REQUIRE(page.runs.size() == 7);
  CHECK(page.runs[3].status == RunStatus::failed);
  CHECK(page.runs[0].id < page.runs[1].id);  // ties by id

  // Filters, each counted in the database, and together.
  CHECK(store::query_runs(db, {.status = RunStatus::completed}).total == 3);
  CHECK(store::query_runs(db, {.status = RunStatus::failed}).total == 1);
  page = store::query_runs(db, {.status = RunStatus::running, .sort = store::RunSort::name, .descending = false});
  CHECK(page.total == 2);
  CHECK(names_of(page) == V{"alphabet", "delta"});
  page = store::query_runs(db, {.status = RunStatus::lost});
  CHECK(page.total == 1);
  CHECK(names_of(page) == V{"Alpha-3"});
  page = store::query_runs(db, {.status = RunStatus::running, .offset = 1, .limit = 5});
  CHECK(page.total == 2);
  CHECK(names_of(page) == V{"alphabet"});
  CHECK(names_of(store::query_runs(db, {.tag = "tenth"})) == V{"alphabet", "Beta"});
  CHECK(store::query_runs(db, {.tag = "none"}).total == 0);
  CHECK(names_of(store::query_runs(db, {.name_contains = "alph"})) == V{"alphabet", "alpha"});  // not "Alpha-3"
  CHECK(store::query_runs(db, {.name_contains = "%"}).total == 0);                              // no LIKE wildcards
  CHECK(store::query_runs(db, {.name_contains = "_"}).total == 0);
  CHECK(names_of(store::query_runs(db, {.spec_hash_prefix = other_hash.substr(0, 6)})) == V{"gamma"});
  CHECK(store::query_runs(db, {.spec_hash_prefix = k_hash}).total == 6);
  page = store::query_runs(db, {.status = RunStatus::completed,
                                .tag = "tenth",
                                .name_contains = "eta",
                                .spec_hash_prefix = k_hash.substr(0, 2)});
  CHECK(page.total == 1);
  CHECK(names_of(page) == V{"Beta"});
  CHECK(page.runs[0].tags == V{"tenth"});
  CHECK_THROWS_WITH(store::query_runs(db, {.spec_hash_prefix = "XYZ"}), Catch::Contains("not lowercase hex"));
}

TEMPLATE_TEST_CASE(
    "store contract: merge_store of a node's store answers one MergeResult on every backend, and a "
    "second merge adds nothing",
    "[store][backends][merge]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  BackendStore node(store::StoreKind::sqlite);
  std::string id;
  {
    auto local = node.open();
    const auto run = new_run(local);
    id = run.id;
    local.append_metrics(run.id,
                         std::vector<MetricPoint>{{0, 1, "loss", 0.5}, {0, 2, "loss", 0.25}, {1, 1, "loss", 1}});
    local.add_tag(run.id, "nightly");
    local.finish_run(run.id, RunStatus::completed, 0, "");
  }
  auto db = where.open();
  const store::MergeResult first = store::merge_store(db, node.location);
  CHECK(first.source == fs::path(node.location));
  CHECK(first.added == std::vector<std::string>{id});
  CHECK(first.present.empty());
  CHECK(first.specs_added == 1);
  CHECK(first.environments_added == 0);
  CHECK(first.tags_added == 1);
  CHECK(first.points_added == 3);
  CHECK(first.folders_copied.empty());
  CHECK(db.metrics(id).size() == 3);
  CHECK(db.run(id)->tags == std::vector<std::string>{"nightly"});

  const store::MergeResult again = store::merge_store(db, node.location);
  CHECK(again.added.empty());
  CHECK(again.present == std::vector<std::string>{id});
  CHECK(again.specs_added == 0);
  CHECK(again.tags_added == 0);
  CHECK(again.points_added == 0);
}

TEST_CASE(
    "store listing: both backends' listings come from one builder, with the same filters and parameters in "
    "the same order",
    "[store][backends]") {
  // The dialects as the backends spell them differ only where SQL does; what is filtered and
  // bound, and in which order, is written once (store/run_listing.cpp).
  const store::RunQuery query{.status = RunStatus::completed,
                              .tag = "nightly",
                              .name_contains = "mlp",
                              .spec_hash_prefix = "ab",
                              .sort = store::RunSort::duration,
                              .limit = 10};
  std::vector<std::vector<store::detail::ListingParam>> params;
  for (const char* placeholder : {"?", "$"}) {
    store::detail::ListingDialect dialect;
    dialect.columns = "id";
    dialect.from = "runs";
    dialect.placeholder = placeholder[0] == '?' ? +[](std::size_t n) { return "?" + std::to_string(n); }
                                                : +[](std::size_t n) { return "$" + std::to_string(n); };
    dialect.name_contains = "contains(name, {0})";
    dialect.spec_hash_starts_with = "prefix(spec_hash, {0})";
    dialect.duration = "span({0})";
    const auto sql = store::detail::listing_sql(query, dialect);
    const std::string p = placeholder;
    CHECK(sql.count == "SELECT count(*) FROM runs WHERE 1 = 1 AND status = " + p + "1 AND id IN (SELECT run_id FROM " +
                           "tags WHERE tag = " + p + "2) AND contains(name, " + p + "3) AND prefix(spec_hash, " + p +
                           "4)");
    CHECK(sql.page.ends_with("ORDER BY span(" + p + "5) DESC, id DESC LIMIT " + p + "6 OFFSET " + p + "7"));
    CHECK(sql.count_params.size() == 4);
    params.push_back(sql.page_params);
  }
  REQUIRE(params[0].size() == 7);
  CHECK(params[0][0].text == "completed");
  CHECK(params[0][5].text == "10");
  CHECK(params[0][5].integer);
  params[0][4].text = params[1][4].text = "now";  // the time now, taken twice
  CHECK(params[0] == params[1]);
}

TEMPLATE_TEST_CASE(
    "store contract: long series over many chunks read back whole by every reader, steps written "
    "again land once, and an ended run's series read the same",
    "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  const auto run = new_run(db);
  // 2 ranks x 10 001 steps in batches of 250 (the recorder's size), steps 0..10 000; a float32
  // loss, a constant lr, a NaN and ±Inf here and there, a gap of steps in rank 1.
  constexpr int k_steps = 10'001;
  const auto loss_at = [](int rank, int step) {
    if (step == 4096 || step == 9000)
      return std::numeric_limits<double>::quiet_NaN();
    if (step == 5000)
      return rank == 0 ? std::numeric_limits<double>::infinity() : -0.0;
    return static_cast<double>(static_cast<float>(2.3 / (1.0 + step * 1e-3) + rank));
  };
  const auto logged = [](int rank, int step) { return rank == 0 || step < 3000 || step >= 3500; };
  std::vector<MetricPoint> batch;
  for (int step = 0; step < k_steps; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      if (logged(rank, step)) {
        batch.push_back({rank, step, "loss", loss_at(rank, step)});
        batch.push_back({rank, step, "lr", 0.05});
      }
    }
    if (batch.size() >= 250 || step + 1 == k_steps) {
      db.append_metrics(run.id, batch);
      batch.clear();
    }
  }
  const std::int64_t rank1_points = k_steps - 500;
  const auto check_all = [&] {
    const auto columns = db.series_columns(run.id, "loss");
    REQUIRE(columns.size() == 2);
    for (const auto& rank : columns) {
      REQUIRE(static_cast<std::int64_t>(rank.steps.size()) == (rank.rank == 0 ? k_steps : rank1_points));
      std::size_t i = 0;
      for (int step = 0; step < k_steps; ++step) {
        if (!logged(rank.rank, step))
          continue;
        REQUIRE(rank.steps[i] == step);
        REQUIRE(same_value(rank.values[i], loss_at(rank.rank, step)));
        ++i;
      }
    }
    // Past a step: only what follows it.
    const auto tail = db.series_columns(run.id, "loss", 9990);
    REQUIRE(tail.size() == 2);
    CHECK(tail[0].steps.front() == 9991);
    CHECK(tail[0].steps.size() == 10);
    const auto points = db.metrics(run.id, {.name = "lr", .rank = 1});
    CHECK(static_cast<std::int64_t>(points.size()) == rank1_points);
    CHECK(db.metrics(run.id).size() == static_cast<std::size_t>(2 * (k_steps + rank1_points)));
    const auto recent = db.recent_metrics(run.id, "loss", 0, 5000);
    REQUIRE(recent.size() == 5000);
    CHECK(recent.front().step == k_steps - 5000);
    CHECK(recent.back().step == k_steps - 1);
    const auto aggregates = db.series_aggregates(run.id, "loss", 100);
    REQUIRE(aggregates.size() == 2);
    CHECK(aggregates[0].nan_count == 2);
    CHECK(aggregates[0].count == k_steps - 101 - 2);
    CHECK(aggregates[0].max == std::numeric_limits<double>::infinity());
    CHECK(aggregates[0].first_step == 101);
    CHECK(aggregates[0].last_step == k_steps - 1);
    CHECK(aggregates[1].min == 0.0);  // the -0.0 at step 5000
    const auto series = db.metric_series(run.id);
    REQUIRE(series.size() == 2);
    CHECK(series[0].name == "loss");
    CHECK(series[0].points == k_steps + rank1_points);
    CHECK(series[0].ranks == 2);
    CHECK(series[0].first_step == 0);
    CHECK(series[0].last_value == loss_at(0, k_steps - 1));
    CHECK(series[1].last_value == 0.05);
  };
  check_all();
  // A resume re-logs steps that are sealed already: each lands once, with the new value.
  std::vector<MetricPoint> again;
  for (int step = 8000; step < 8100; ++step) {
    again.push_back({0, step, "loss", loss_at(0, step)});
  }
  db.append_metrics(run.id, again);
  check_all();
  db.finish_run(run.id, RunStatus::completed, 0, "");
  check_all();
}

TEMPLATE_TEST_CASE(
    "store contract: series_envelope buckets every point in step order with each bucket's min, max "
    "and last, and coarse buckets read no point",
    "[store][backends]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  const auto run = new_run(db);
  constexpr int k_steps = 30'001;
  std::vector<MetricPoint> points;
  for (int step = 0; step < k_steps; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      const double value = step % 997 == 0 ? std::numeric_limits<double>::quiet_NaN()
                                           : std::sin(step * 0.001) * (rank + 1) + 0.01 * (step % 13);
      points.push_back({rank, step, "loss", value});
    }
  }
  db.append_metrics(run.id, points);
  db.finish_run(run.id, RunStatus::completed, 0, "");
  db.append_metrics(run.id, std::vector<MetricPoint>{{0, k_steps, "loss", 7.0}});  // an open point after the end

  const auto check = [&](std::size_t buckets, std::int64_t after,
                         std::int64_t upto = std::numeric_limits<std::int64_t>::max()) {
    INFO("buckets " << buckets << ", after step " << after << ", up to step " << upto);
    const auto envelope = db.series_envelope(run.id, "loss", buckets, after, upto);
    const auto full = db.series_columns(run.id, "loss", after, upto);
    REQUIRE(envelope.size() == full.size());
    for (std::size_t r = 0; r < full.size(); ++r) {
      const auto& columns = full[r];
      CHECK(envelope[r].rank == columns.rank);
      CHECK(envelope[r].buckets.size() <= 2 * buckets + 2);
      std::size_t i = 0;
      for (const store::SeriesBucket& bucket : envelope[r].buckets) {
        REQUIRE(i < columns.steps.size());
        CHECK(bucket.first_step == columns.steps[i]);
        double low = std::numeric_limits<double>::quiet_NaN();
        double high = low;
        for (std::int64_t n = 0; n < bucket.points; ++n, ++i) {
          const double value = columns.values.at(i);
          if (!std::isnan(value)) {
            low = std::isnan(low) ? value : std::min(low, value);
            high = std::isnan(high) ? value : std::max(high, value);
          }
        }
        CHECK(bucket.last_step == columns.steps.at(i - 1));
        CHECK(same_value(bucket.min, low));
        CHECK(same_value(bucket.max, high));
        CHECK(same_value(bucket.last, columns.values.at(i - 1)));
      }
      CHECK(i == columns.steps.size());
    }
  };
  for (const std::size_t buckets : {1U, 3U, 7U, 100U, 100000U}) {
    check(buckets, std::numeric_limits<std::int64_t>::min());
    check(buckets, 5000);
    // A zoomed range: cut inside chunks, on a chunk's last step, inside one chunk, past the end.
    check(buckets, 5000, 20'000);
    check(buckets, std::numeric_limits<std::int64_t>::min(), 8191);
    check(buckets, 4200, 4300);
    check(buckets, 12'000, k_steps + 5);
  }
  const auto cut = db.series_columns(run.id, "loss", 100, 20'000);
  REQUIRE(cut.size() == 2);
  CHECK(cut[0].steps.front() == 101);
  CHECK(cut[0].steps.back() == 20'000);
  CHECK(cut[0].steps.size() == 19'900);
  // A damaged chunk in the middle: the coarse envelope never decodes it, every point reader does.
  where.execute(TestType::kind == store::StoreKind::sqlite
                    ? "UPDATE metric_chunks SET data = x'01' WHERE first_step = 8192"
                    : "UPDATE metric_chunks SET data = '\\x01'::bytea WHERE first_step = 8192");
  CHECK(db.series_envelope(run.id, "loss", 3).at(0).buckets.size() >= 3);
  // A range beside it reads only its own chunks, point by point or from their headers.
  CHECK(db.series_columns(run.id, "loss", 12'500, 13'000).at(0).steps.size() == 500);
  CHECK(db.series_envelope(run.id, "loss", 2, 12'500, k_steps).at(0).buckets.size() >= 2);
  CHECK_THROWS_WITH(db.series_columns(run.id, "loss"), Catch::Contains("metric chunk is damaged"));
}
