#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/atomic_file.hpp"

using namespace expctl;
namespace fs = std::filesystem;

TEST_CASE("schema: a v1 database with data is migrated to the latest version, data intact") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v1");
  const std::string run_id = "20250101-000000-00abcd";
  {
    auto v1 = store::testing::open_at_schema_version(db_path, 1);
    CHECK(v1.schema_version() == 1);
    v1.put_spec(hash, "{\"v\":1}", "v1 spec");
    // As expctl v1 wrote it (create_run now records columns v1 does not have).
    store::testing::execute_sql(
        db_path, "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) VALUES ('" + run_id + "', '" +
                     hash + "', 'old run', 'running', '2025-01-01T00:00:00.000Z', 'runs/" + run_id + "')");
    v1.add_tag(run_id, "legacy");
    // Points as v1 wrote them (by name; append_metrics now writes metric keys, v4).
    store::testing::execute_sql(db_path, "INSERT INTO metrics (run_id, name, rank, step, value) VALUES ('" + run_id +
                                             "', 'loss', 0, 1, 2.5), ('" + run_id + "', 'loss', 0, 2, 1.5)");
    v1.finish_run(run_id, store::RunStatus::completed, 0, "");
  }
  // v1 has no summary column yet: the v2 step adds it.
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "SELECT summary FROM runs"), Catch::Contains("summary"));

  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == store::latest_schema_version());
  const auto runs = db.list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].id == run_id);
  CHECK(runs[0].name == "old run");
  CHECK(runs[0].status == store::RunStatus::completed);
  CHECK(runs[0].summary_json == "{}");
  CHECK(runs[0].tags == std::vector<std::string>{"legacy"});
  CHECK_FALSE(runs[0].owner.has_value());
  CHECK_FALSE(runs[0].heartbeat_at.has_value());
  CHECK(db.metrics(run_id).size() == 2);
  CHECK(db.spec(hash)->name == "v1 spec");
  db.set_summary(run_id, R"({"eval_accuracy":0.9})");
  CHECK(db.run(run_id)->summary_json == R"({"eval_accuracy":0.9})");
}

TEST_CASE("schema: reading an older database upgrades it in place") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  { store::testing::open_at_schema_version(db_path, 1); }
  auto db = store::Store::open(db_path, store::OpenMode::read_only);
  CHECK(db.schema_version() == store::latest_schema_version());
  CHECK(db.list_runs().empty());
}

TEST_CASE("schema: opened with upgrade off, an older database is refused in one line and left byte for byte") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  { store::testing::open_at_schema_version(db_path, 1); }
  const auto before = util::read_file(db_path);
  REQUIRE(before);
  store::StoreOptions options;
  options.upgrade = false;
  for (const auto mode : {store::OpenMode::read_only, store::OpenMode::read_write}) {
    CHECK_THROWS_WITH(store::Store::open(db_path.string(), mode, options),
                      db_path.string() + ": written by an older expctl (schema v1, this one needs v" +
                          std::to_string(store::latest_schema_version()) +
                          "), and this command never writes: upgrade it once with 'expctl --db " + db_path.string() +
                          " list', then run this again");
  }
  try {
    store::Store::open(db_path.string(), store::OpenMode::read_only, options);
    FAIL("an older database opened with upgrade off");
  } catch (const util::StoreError& error) {
    CHECK(error.exit_code() == util::ExitCode::usage);
  }
  const auto after = util::read_file(db_path);
  REQUIRE(after);
  CHECK(*after == *before);
  // A current one opens as ever.
  { store::Store::open(db_path); }
  CHECK(store::Store::open(db_path.string(), store::OpenMode::read_only, options).schema_version() ==
        store::latest_schema_version());
}

TEST_CASE("schema: a database from a newer expctl is refused, and left as it is") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  { store::Store::open(db_path); }
  store::testing::execute_sql(db_path, "PRAGMA user_version = 99");
  const auto before = util::read_file(db_path);
  REQUIRE(before);
  const std::string expected = db_path.string() + ": written by a newer expctl (schema v99, this one reads up to v" +
                               std::to_string(store::latest_schema_version()) + "): upgrade expctl";
  for (const auto mode : {store::OpenMode::read_write, store::OpenMode::read_only}) {
    CHECK_THROWS_WITH(store::Store::open(db_path, mode), expected);
  }
  try {
    store::Store::open(db_path);
    FAIL("a database from a newer expctl opened");
  } catch (const util::StoreError& error) {
    CHECK(error.exit_code() == util::ExitCode::usage);
  }
  // Left as it is: byte for byte (user_version 99 included: it is bytes 60-63 of the header),
  // with no journal beside it.
  const auto after = util::read_file(db_path);
  REQUIRE(after);
  CHECK(*after == *before);
  REQUIRE(after->size() > 64);
  CHECK(static_cast<unsigned char>((*after)[63]) == 99);
  CHECK_FALSE(fs::exists(db_path.string() + "-wal"));
}

TEST_CASE("schema: a file that is not SQLite is refused by name and never modified") {
  test::TempDir dir;
  std::string garbage = "this is not a database, just some text\n";
  for (int i = 0; i < 200; ++i) {
    garbage += static_cast<char>((i * 37) & 0xff);
  }
  const fs::path db_path = dir.write("notes.db", garbage);
  for (const auto mode : {store::OpenMode::read_write, store::OpenMode::read_only}) {
    CHECK_THROWS_WITH(store::Store::open(db_path, mode),
                      db_path.string() + ": not an expctl database (the file is not SQLite): check --db / EXPCTL_DB");
  }
  CHECK(util::read_file(db_path).value() == garbage);
  CHECK_FALSE(fs::exists(db_path.string() + "-wal"));
  CHECK_FALSE(fs::exists(db_path.string() + "-journal"));
}

TEST_CASE("schema: another application's SQLite database is refused") {
  test::TempDir dir;
  const fs::path db_path = dir / "other.db";
  { store::Store::open(db_path); }
  store::testing::execute_sql(db_path, "PRAGMA application_id = 1234");
  CHECK_THROWS_WITH(store::Store::open(db_path),
                    db_path.string() + ": a SQLite database, but not one of expctl's: check --db / EXPCTL_DB");
}

TEST_CASE("schema: opening for reading never creates a database") {
  test::TempDir dir;
  const fs::path db_path = dir / "nested" / "expctl.db";
  CHECK_THROWS_WITH(store::Store::open(db_path, store::OpenMode::read_only),
                    db_path.string() +
                        ": no such database (runs are recorded by 'expctl run'; pick another with --db PATH or "
                        "EXPCTL_DB)");
  CHECK_FALSE(fs::exists(db_path.parent_path()));
}

TEST_CASE("schema: a directory given as the database is refused") {
  test::TempDir dir;
  CHECK_THROWS_WITH(store::Store::open(dir.path()), dir.path().string() + ": is a directory, not a database file");
}

TEST_CASE("schema: a store opened read-only reads but refuses writes") {
  test::StoreFixture f;
  const auto run = f.new_run();
  auto reader = store::Store::open(f.db_path, store::OpenMode::read_only);
  CHECK(reader.find_run(run.id).id == run.id);
  CHECK_THROWS_AS(reader.add_tag(run.id, "x"), util::InternalError);
}

TEST_CASE(
    "schema: a v6 store whose metrics table holds a step that is not an ascending integer is refused by v8 in one "
    "line, and left at v6 with every row") {
  // Found by fuzz_store_read: rows the primary key does not keep apart (steps 1.5 and 1.7 both
  // read as step 1) failed an assertion in the chunk encoder instead of refusing the file.
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v6 damaged");
  const std::string id = "20261201-000000-00000a";
  {
    auto v6 = store::testing::open_at_schema_version(db_path, 6);
    v6.put_spec(hash, "{}", "v6 spec");
  }
  store::testing::execute_sql(db_path, "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) VALUES ('" +
                                           id + "', '" + hash +
                                           "', 'v6 run', 'completed', '2026-12-01T00:00:00.000Z', 'runs/" + id + "')");
  store::testing::execute_sql(db_path, "INSERT INTO metric_keys (name) VALUES ('loss')");
  std::string step_two = "2";
  std::string step_three = "3";
  SECTION("two steps that read as the same integer") {
    step_two = "1.5";
    step_three = "1.7";
  }
  SECTION("a step stored as text") {
    step_three = "'3rd'";
  }
  SECTION("whole ascending integers, the same rows otherwise") {}
  store::testing::execute_sql(db_path, "INSERT INTO metrics (run_id, key_id, rank, step, value) VALUES ('" + id +
                                           "', 1, 0, 0, 1.0), ('" + id + "', 1, 0, " + step_two + ", 2.0), ('" + id +
                                           "', 1, 0, " + step_three + ", 3.0)");
  const bool damaged = step_two != "2" || step_three != "3";
  if (!damaged) {
    // The same rows as whole ascending integers migrate.
    CHECK(store::Store::open(db_path).series_columns(id, "loss").at(0).steps == std::vector<std::int64_t>{0, 2, 3});
    return;
  }
  for (const auto mode : {store::OpenMode::read_only, store::OpenMode::read_write}) {
    try {
      store::Store::open(db_path.string(), mode);
      FAIL("a damaged v6 metrics table migrated");
    } catch (const util::StoreError& error) {
      const std::string message = error.what();
      CHECK_THAT(message, Catch::StartsWith(db_path.string() + ": cannot migrate to schema v8: run \"" + id +
                                            "\"'s metric (key 1, rank 0) holds step"));
      CHECK_THAT(message, Catch::Contains("the store is unchanged: restore it from a backup"));
      CHECK(message.find('\n') == std::string::npos);
      CHECK(error.exit_code() == util::ExitCode::usage);
    }
  }
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metrics") == "3");
  CHECK(store::testing::query_sqlite(db_path, "PRAGMA user_version") == "6");
}

TEST_CASE("schema: a damaged database is reported as corrupt in one line") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("corrupt");
  {
    auto db = store::Store::open(db_path);
    db.put_spec(hash, "{}", "x");
    db.create_run({hash, std::nullopt, "x", std::nullopt});
  }
  // Closing the last connection checkpoints the WAL into the file; now overwrite every page
  // after the first (the schema stays readable, the tables do not).
  std::string bytes = util::read_file(db_path).value();
  REQUIRE(bytes.size() > 4096);
  std::fill(bytes.begin() + 4096, bytes.end(), '\xa5');
  REQUIRE(util::write_file_atomic(db_path, bytes).has_value());
  CHECK_THROWS_WITH(
      store::Store::open(db_path).list_runs(),
      db_path.string() + ": the database file is corrupt (restore it from a backup, or start a new one with --db)");
}

namespace {

/// Inserts a run row as expctl v2 wrote it (no owner columns).
void insert_v2_run(const fs::path& db_path, const std::string& id, const std::string& hash, const std::string& status,
                   const std::string& started_at) {
  store::testing::execute_sql(
      db_path, "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir, summary) VALUES ('" + id + "', '" +
                   hash + "', 'v2 run', '" + status + "', '" + started_at + "', 'runs/" + id + "', '{\"steps\":3}')");
}

}  // namespace

TEST_CASE("schema: v3 rebuilds runs and ranks from v2 keeping every row, child row, order and index") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v2");
  const std::string same_start = "2025-06-01T12:00:00.000Z";
  const std::string first = "20250601-120000-000001";
  const std::string done = "20250601-110000-000002";
  const std::string tied = "20250601-120000-000003";  // same start as `first`, created after it
  {
    auto v2 = store::testing::open_at_schema_version(db_path, 2);
    v2.put_spec(hash, "{}", "v2 spec");
    v2.put_environment("env-v2", "{}");
    insert_v2_run(db_path, first, hash, "running", same_start);
    insert_v2_run(db_path, done, hash, "completed", "2025-06-01T11:00:00.000Z");
    insert_v2_run(db_path, tied, hash, "failed", same_start);
    for (const auto& id : {first, done, tied}) {
      v2.add_rank(id, store::RankRecord{0, "node1", 100, std::string("env-v2"), store::RunStatus::running, {}, {}});
      store::testing::execute_sql(db_path, "INSERT INTO metrics (run_id, name, rank, step, value) VALUES ('" + id +
                                               "', 'loss', 0, 1, 2.0), ('" + id + "', 'loss', 0, 2, 1.0)");
      v2.add_artifact(id, {"checkpoints/step-2.pt", std::string(64, 'c'), 10});
      v2.add_tag(id, "v2");
    }
    v2.update_rank(done, 0, store::RunStatus::completed, 0, std::nullopt);
  }

  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == store::latest_schema_version());
  std::vector<std::string> ids;
  for (const auto& run : db.list_runs()) {
    ids.push_back(run.id);
    CHECK(run.summary_json == "{\"steps\":3}");
    CHECK(run.tags == std::vector<std::string>{"v2"});
    CHECK(db.ranks(run.id).size() == 1);
    CHECK(db.metrics(run.id).size() == 2);
    CHECK(db.artifacts(run.id).size() == 1);
    CHECK_FALSE(run.owner.has_value());
  }
  CHECK(ids == std::vector<std::string>{tied, first, done});  // ties still in creation order
  // A running row from before owners were recorded cannot be judged: it stays running.
  CHECK(db.run(first)->status == store::RunStatus::running);
  CHECK(db.ranks(done).at(0).status == store::RunStatus::completed);
  CHECK(db.ranks(first).at(0).environment_hash == std::optional<std::string>("env-v2"));
  CHECK_THROWS_WITH(db.resume_run(first), Catch::Contains("is running: only an interrupted"));

  // The indexes are back, the CHECKs admit the new statuses only, and the children reference
  // the new runs table (deleting a run still cascades; unknown runs are still refused).
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "CREATE INDEX runs_by_start ON runs(started_at)"),
                    Catch::Contains("already exists"));
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "CREATE INDEX runs_by_spec ON runs(spec_hash)"),
                    Catch::Contains("already exists"));
  store::testing::execute_sql(db_path, "UPDATE runs SET status = 'diverged' WHERE id = '" + done + "'");
  store::testing::execute_sql(db_path, "UPDATE ranks SET status = 'diverged' WHERE run_id = '" + done + "'");
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "UPDATE ranks SET status = 'exploded'"),
                    Catch::Contains("CHECK constraint failed"));
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "UPDATE runs SET owner_host = 'x' WHERE id = '" + done + "'"),
                    Catch::Contains("CHECK constraint failed"));
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "INSERT INTO metric_points VALUES ('nosuchrun', 1, 0, 1, 1)"),
                    Catch::Contains("FOREIGN KEY constraint failed"));
  store::testing::execute_sql(db_path, "DELETE FROM runs WHERE id = '" + done + "'");
  CHECK(db.metrics(done).empty());
  CHECK(db.ranks(done).empty());
  CHECK(db.artifacts(done).empty());
  CHECK(db.metrics(first).size() == 2);
}

TEST_CASE("schema: v4 moves metric names out of the metrics table into metric_keys, every point (NaN too) readable "
          "as before") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v3");
  const std::string a = "20250701-000000-00000a";
  const std::string b = "20250701-000000-00000b";
  {
    auto v3 = store::testing::open_at_schema_version(db_path, 3);
    v3.put_spec(hash, "{}", "v3 spec");
    for (const auto& id : {a, b}) {
      store::testing::execute_sql(db_path, "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) "
                                           "VALUES ('" + id + "', '" + hash + "', 'v3 run', 'completed', "
                                           "'2025-07-01T00:00:00.000Z', 'runs/" + id + "')");
    }
    // As v3 wrote them: names in every row, a NaN as NULL, a Unicode name, two ranks.
    store::testing::execute_sql(
        db_path, "INSERT INTO metrics (run_id, name, rank, step, value) VALUES "
                 "('" + a + "', 'loss', 0, 1, 2.0), ('" + a + "', 'loss', 0, 2, NULL), ('" + a + "', 'loss', 1, 1, 3.0), "
                 "('" + a + "', 'λ_score', 0, 5, 0.5), ('" + a + "', 'accuracy', 0, 9223372036854775807, 0.25), "
                 "('" + b + "', 'loss', 0, 1, 4.0)");
  }
  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == store::latest_schema_version());
  const auto points = db.metrics(a);
  REQUIRE(points.size() == 5);
  // Ordered by name (byte order), rank, step, as before.
  CHECK(points[0].name == "accuracy");
  CHECK(points[0].step == std::numeric_limits<std::int64_t>::max());
  CHECK(points[1].name == "loss");
  CHECK(points[1].value == 2.0);
  CHECK(std::isnan(points[2].value));
  CHECK(points[3].rank == 1);
  CHECK(points[4].name == "λ_score");
  CHECK(db.metrics(b).size() == 1);
  CHECK(db.metrics(a, {.name = "loss", .rank = 1}).size() == 1);
  const auto series = db.metric_series(a);
  REQUIRE(series.size() == 3);
  CHECK(series[1].name == "loss");
  CHECK(series[1].points == 3);
  CHECK(series[1].ranks == 2);
  CHECK(std::isnan(series[1].last_value));
  const auto columns = db.series_columns(a, "loss");
  REQUIRE(columns.size() == 2);
  CHECK(columns[0].steps == std::vector<std::int64_t>{1, 2});
  CHECK(db.series_aggregates(a, "loss").at(0).nan_count == 1);
  CHECK(db.recent_metrics(a, "loss", 0, 1).at(0).step == 2);
  // The big table holds keys, not names; new points reuse a name's key or make one.
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "SELECT name FROM metric_points"),
                    Catch::Contains("no such column"));
  db.append_metrics(b, std::vector<store::MetricPoint>{{0, 2, "loss", 3.0}, {0, 1, "new", 1.0}});
  CHECK(db.metrics(b).size() == 3);
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "INSERT INTO metric_keys (name) VALUES ('loss')"),
                    Catch::Contains("UNIQUE constraint failed"));
  CHECK(store::check_integrity(db) == "ok");
}

TEST_CASE(
    "schema: v7 rebuilds runs from v6 keeping every column, owner, folder size and child row, and admits queued") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v6");
  std::string owned;
  std::string done;
  {
    auto v6 = store::testing::open_at_schema_version(db_path, 6);
    v6.put_spec(hash, "{}", "v6 spec");
    v6.put_environment("env-v6", "{}");
    owned = v6.create_run({hash, std::string("env-v6"), "owned", std::nullopt}).id;
    done = v6.create_run({hash, std::nullopt, "done", std::nullopt}).id;
    v6.add_tag(done, "v6");
    v6.add_rank(done, store::RankRecord{.rank = 0, .host = "node1", .pid = 7});
    v6.append_metrics(done, std::vector<store::MetricPoint>{{0, 1, "loss", 2.0}, {0, 2, "loss", 1.0}});
    v6.finish_run(done, store::RunStatus::completed, 0, "");
    CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "UPDATE runs SET status = 'queued'"),
                      Catch::Contains("CHECK constraint failed"));
  }
  const auto before = store::Store::open(db_path, store::OpenMode::read_only).run(owned).value();

  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == store::latest_schema_version());
  const auto after = db.run(owned).value();
  CHECK(after.owner == before.owner);
  CHECK(after.heartbeat_at == before.heartbeat_at);
  CHECK(after.environment_hash == std::optional<std::string>("env-v6"));
  CHECK(after.status == store::RunStatus::running);
  CHECK(db.run(done)->tags == std::vector<std::string>{"v6"});
  CHECK(db.ranks(done).size() == 1);
  CHECK(db.metrics(done).size() == 2);
  CHECK(db.run(done)->exit_code == 0);
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "CREATE INDEX runs_by_start ON runs(started_at)"),
                    Catch::Contains("already exists"));
  db.queue_run(owned, "waiting for Slurm job 12");
  CHECK(db.run(owned)->status == store::RunStatus::queued);
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "UPDATE runs SET status = 'parked'"),
                    Catch::Contains("CHECK constraint failed"));
  store::testing::execute_sql(db_path, "DELETE FROM runs WHERE id = '" + done + "'");
  CHECK(db.metrics(done).empty());
  CHECK(db.ranks(done).empty());
}

TEST_CASE(
    "schema: v8 turns a v6 store's row-per-point metrics into chunks in place, every point read back as "
    "before, and the store takes new points") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v6");
  const std::string done = "20261201-000000-00000a";
  const std::string live = "20261201-000000-00000b";
  constexpr std::int64_t k_steps = 10'000;  // 3 chunks a series: 4096 + 4096 + 1808
  {
    // As the landed main (schema v6) wrote them: one row per point under integer metric keys,
    // NaN as NULL.
    auto v6 = store::testing::open_at_schema_version(db_path, 6);
    v6.put_spec(hash, "{}", "v6 spec");
    for (const auto& id : {done, live}) {
      store::testing::execute_sql(db_path,
                                  "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) "
                                  "VALUES ('" +
                                      id + "', '" + hash + "', 'v6 run', '" +
                                      (id == done ? "completed" : "interrupted") +
                                      "', '2026-12-01T00:00:00.000Z', 'runs/" + id + "')");
    }
    store::testing::execute_sql(db_path, "INSERT INTO metric_keys (name) VALUES ('loss'), ('lr')");
    std::string sql = "WITH RECURSIVE s(step) AS (SELECT 1 UNION ALL SELECT step + 1 FROM s WHERE step < " +
                      std::to_string(k_steps) + ") INSERT INTO metrics (run_id, key_id, rank, step, value) ";
    sql +=
        "SELECT r.id, k.id, rk.rank, s.step, CASE WHEN k.name = 'lr' THEN 0.05 WHEN s.step = 777 THEN NULL "
        "ELSE 2.5 / s.step + rk.rank END FROM s, (SELECT id FROM runs) r, (SELECT id, name FROM metric_keys) k, "
        "(SELECT 0 AS rank UNION ALL SELECT 1) rk";
    store::testing::execute_sql(db_path, sql);
  }
  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == store::latest_schema_version());
  CHECK_THROWS_WITH(store::testing::execute_sql(db_path, "SELECT count(*) FROM metrics"),
                    Catch::Contains("no such table"));
  for (const auto& id : {done, live}) {
    const auto loss = db.series_columns(id, "loss");
    REQUIRE(loss.size() == 2);
    for (const auto& rank : loss) {
      REQUIRE(rank.steps.size() == static_cast<std::size_t>(k_steps));
      for (std::int64_t i = 0; i < k_steps; ++i) {
        const std::int64_t step = i + 1;
        REQUIRE(rank.steps[static_cast<std::size_t>(i)] == step);
        const double value = rank.values[static_cast<std::size_t>(i)];
        if (step == 777) {
          REQUIRE(std::isnan(value));
        } else {
          REQUIRE(value == 2.5 / static_cast<double>(step) + rank.rank);
        }
      }
    }
    const auto lr = db.metrics(id, {.name = "lr", .rank = 1});
    REQUIRE(lr.size() == static_cast<std::size_t>(k_steps));
    CHECK(lr.back().value == 0.05);
    CHECK(db.metric_series(id).at(0).points == 2 * k_steps);
  }
  // Every series is three chunks, nothing is left row by row.
  const auto sealed = [&](const std::string& id) {
    return std::stoll(
        store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_chunks WHERE run_id = '" + id + "'"));
  };
  CHECK(sealed(done) == 2 * 2 * 3);
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_points") == "0");
  // A resume of the interrupted run continues its last, short chunk and re-logs a step of a
  // sealed one; finishing seals both again.
  db.append_metrics(live, std::vector<store::MetricPoint>{{0, 5000, "loss", -0.0}, {0, k_steps + 1, "loss", 9.0}});
  const auto again = db.series_columns(live, "loss").at(0);
  REQUIRE(again.steps.size() == static_cast<std::size_t>(k_steps + 1));
  CHECK(std::signbit(again.values[4999]));
  CHECK(again.values.back() == 9.0);
  db.finish_run(live, store::RunStatus::completed, 0, "");
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_points") == "0");
  CHECK(db.series_columns(live, "loss").at(0).steps == again.steps);
  CHECK(store::check_integrity(db) == "ok");
}

TEST_CASE("schema: v9 reads a v8 store's chunks and open points as they are, and seals decimals in format 3") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = test::fake_spec_hash("v8");
  std::string id;
  std::vector<store::MetricPoint> points;
  // A v8 store: a sealed chunk of full-precision values (formats 1 and 2 only) and open points.
  constexpr std::int64_t k_steps = 5000;
  for (std::int64_t step = 1; step <= k_steps; ++step) {
    points.push_back({0, step, "loss", std::sqrt(static_cast<double>(step) + 0.5)});
  }
  points.push_back({0, k_steps + 1, "loss", -0.0});
  {
    auto v8 = store::testing::open_at_schema_version(db_path, 8);
    v8.put_spec(hash, "{}", "v8 spec");
    id = v8.create_run({hash, std::nullopt, "v8 run", std::nullopt}).id;
    v8.append_metrics(id, points);
    CHECK(v8.schema_version() == 8);
  }
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_chunks") == "1");
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_points") == "905");
  CHECK(store::testing::query_sqlite(db_path, "SELECT hex(substr(data, 1, 1)) FROM metric_chunks") != "03");
  auto db = store::Store::open(db_path);
  CHECK(db.schema_version() == 9);
  const auto read = db.series_columns(id, "loss");
  REQUIRE(read.size() == 1);
  REQUIRE(read[0].steps.size() == points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    REQUIRE(read[0].steps[i] == points[i].step);
    REQUIRE(std::bit_cast<std::uint64_t>(read[0].values[i]) == std::bit_cast<std::uint64_t>(points[i].value));
  }
  // A timer of whole nanoseconds, sealed at the run's end: format 3, read back bit for bit.
  std::vector<store::MetricPoint> timer;
  for (std::int64_t step = 1; step <= 300; ++step) {
    timer.push_back({0, step, "forward_ms", static_cast<double>(15'000'000 + (step * 7919) % 1'000'000) / 1e6});
  }
  db.append_metrics(id, timer);
  db.finish_run(id, store::RunStatus::completed, 0, "");
  CHECK(store::testing::query_sqlite(db_path,
                                     "SELECT hex(substr(c.data, 1, 1)) FROM metric_chunks c JOIN metric_keys "
                                     "k ON k.id = c.key_id WHERE k.name = 'forward_ms'") == "03");
  const auto forward = db.series_columns(id, "forward_ms").at(0);
  REQUIRE(forward.values.size() == timer.size());
  for (std::size_t i = 0; i < timer.size(); ++i) {
    REQUIRE(std::bit_cast<std::uint64_t>(forward.values[i]) == std::bit_cast<std::uint64_t>(timer[i].value));
  }
  CHECK(db.series_columns(id, "loss").at(0).steps.size() == points.size());
  CHECK(store::check_integrity(db) == "ok");
}

TEST_CASE("store: a run's last chunks, sealed when it ends, are written packed into few pages") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  auto db = store::Store::open(db_path);
  const std::string hash = test::fake_spec_hash("packed");
  db.put_spec(hash, "{}", "packed");
  const std::string id = db.create_run({hash, std::nullopt, "packed", std::nullopt}).id;
  // 40 series of 20-300 full-precision doubles (chunks of ~0.15-2.2 KiB), two ranks: written in
  // series order, a 4 KiB page would hold one or two of them.
  std::mt19937_64 random(5);
  std::vector<store::MetricPoint> points;
  for (int series = 0; series < 40; ++series) {
    const int count = 20 + (series * 137) % 281;
    for (int rank = 0; rank < 2; ++rank) {
      for (int step = 1; step <= count; ++step) {
        points.push_back({rank, step, "m" + std::to_string(series), std::bit_cast<double>(random() >> 2)});
      }
    }
  }
  db.append_metrics(id, points);
  db.finish_run(id, store::RunStatus::completed, 0, "");
  CHECK(store::testing::query_sqlite(db_path, "SELECT count(*) FROM metric_points") == "0");
  const auto stat = [&](const char* what) {
    return std::stod(store::testing::query_sqlite(
        db_path, std::string("SELECT ") + what + " FROM dbstat WHERE name = 'metric_chunks' AND pagetype = 'leaf'"));
  };
  const double leaves = stat("count(*)");
  const double payload = stat("sum(payload)");
  const double page = std::stod(store::testing::query_sqlite(db_path, "PRAGMA page_size"));
  INFO("leaf pages " << leaves << " for " << payload << " bytes of rows");
  // Packed: 27 leaf pages, 98 % rows. In series order they took 32, 83 % rows.
  CHECK(leaves <= std::ceil(payload / page) + 1);
  CHECK(payload / (leaves * page) > 0.93);
  for (int series = 0; series < 40; series += 7) {
    const auto read = db.series_columns(id, "m" + std::to_string(series));
    REQUIRE(read.size() == 2);
    std::size_t at = 0;
    for (const auto& point : points) {
      if (point.name == "m" + std::to_string(series) && point.rank == 1) {
        REQUIRE(std::bit_cast<std::uint64_t>(read[1].values.at(at++)) == std::bit_cast<std::uint64_t>(point.value));
      }
    }
    CHECK(at == read[1].values.size());
  }
}
