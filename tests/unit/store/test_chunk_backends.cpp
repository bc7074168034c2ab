// Series as chunks on both backends (SQLite v8, PostgreSQL v6): values bit for bit through every
// reader, sealed and open; PostgreSQL's migration from the row-per-point v5; and the shipper
// carrying the node's chunks to the server as they are.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend_fixture.hpp"
#include <fmt/format.h>

#include "expctl/store/ship.hpp"

using namespace expctl;
using store::MetricPoint;
using store::RunStatus;
using test::BackendStore;

namespace {

const std::string& k_spec = test::k_contract_spec;
const std::string& k_hash = test::k_contract_hash;

store::RunRecord new_run(store::Store& db) {
  db.put_spec(k_hash, k_spec, "quickstart");
  return db.create_run(store::NewRun{k_hash, std::nullopt, "chunks", std::nullopt});
}

/// Values whose bits a store could lose: NaN payloads (quiet and signalling, either sign), ±Inf,
/// -0.0, the smallest subnormal, the extremes; the rest an ordinary float32 loss.
std::uint64_t bits_at(std::int64_t step) {
  static constexpr std::uint64_t k_special[] = {
      0x7ff8000000000123ULL,  // a quiet NaN with a payload
      0xfff8000000000000ULL,  // -NaN
      0x7ff0000000000001ULL,  // a signalling NaN
      0x7ff0000000000000ULL,  // +Inf
      0xfff0000000000000ULL,  // -Inf
      0x8000000000000000ULL,  // -0.0
      0x0000000000000001ULL,  // the smallest subnormal
      0x7fefffffffffffffULL,  // the largest double
  };
  if (step % 97 < 8) {
    return k_special[step % 97];
  }
  return std::bit_cast<std::uint64_t>(static_cast<double>(static_cast<float>(2.3 / (1.0 + 1e-3 * step))));
}

std::uint64_t bits(double value) {
  return std::bit_cast<std::uint64_t>(value);
}

}  // namespace

TEMPLATE_TEST_CASE(
    "store contract: values read back bit for bit (NaN payloads, ±Inf, -0.0, subnormals) from sealed chunks "
    "and open points, through every reader",
    "[store][backends][chunks]", test::OnSqlite, test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  const auto run = new_run(db);
  // 2 sealed chunks and 1 808 open points of rank 0, in batches as the recorder writes them.
  constexpr std::int64_t k_steps = 10'000;
  std::vector<MetricPoint> batch;
  for (std::int64_t step = 0; step < k_steps; ++step) {
    batch.push_back({0, step, "loss", std::bit_cast<double>(bits_at(step))});
    if (batch.size() == 500 || step + 1 == k_steps) {
      db.append_metrics(run.id, batch);
      batch.clear();
    }
  }
  const auto check_all = [&] {
    const auto columns = db.series_columns(run.id, "loss");
    REQUIRE(columns.size() == 1);
    REQUIRE(columns[0].steps.size() == static_cast<std::size_t>(k_steps));
    for (std::int64_t step = 0; step < k_steps; ++step) {
      const auto i = static_cast<std::size_t>(step);
      REQUIRE(columns[0].steps[i] == step);
      REQUIRE(bits(columns[0].values[i]) == bits_at(step));
    }
    const auto points = db.metrics(run.id, {.name = "loss", .rank = 0});
    REQUIRE(points.size() == static_cast<std::size_t>(k_steps));
    for (const MetricPoint& point : points) {
      REQUIRE(bits(point.value) == bits_at(point.step));
    }
    const auto recent = db.recent_metrics(run.id, "loss", 0, 6000);
    REQUIRE(recent.size() == 6000);
    for (const MetricPoint& point : recent) {
      REQUIRE(bits(point.value) == bits_at(point.step));
    }
    const auto series = db.metric_series(run.id);
    REQUIRE(series.size() == 1);
    CHECK(bits(series[0].first_value) == bits_at(0));
    CHECK(bits(series[0].last_value) == bits_at(k_steps - 1));
    CHECK(db.metric_names(run.id) == std::vector<std::string>{"loss"});
    const auto envelope = db.series_envelope(run.id, "loss", 2);
    REQUIRE(envelope.size() == 1);
    CHECK(bits(envelope[0].buckets.back().last) == bits_at(k_steps - 1));
  };
  check_all();
  const auto sealed = [&] { return std::stoll(where.query("SELECT count(*) FROM metric_chunks")); };
  const auto open = [&] { return std::stoll(where.query("SELECT count(*) FROM metric_points")); };
  CHECK(sealed() == 2);
  CHECK(open() == k_steps - 2 * 4096);
  db.finish_run(run.id, RunStatus::completed, 0, "");  // seals the rest
  CHECK(sealed() == 3);
  CHECK(open() == 0);
  check_all();
}

TEST_CASE(
    "postgres: v6 turns a v5 store's row-per-point metrics into chunks in the migration's transaction, every "
    "point read back as before, and a migration that fails leaves the store at v5, whole",
    "[store][backends][chunks][schema]") {
  BackendStore where(store::StoreKind::postgresql);
  if (!where.available)
    return;
  constexpr std::int64_t k_steps = 10'000;  // 3 chunks a series: 4096 + 4096 + 1808
  std::vector<std::string> ids;
  {
    // As the landed main (schema v5) wrote them: one float8 row per point under integer keys.
    // (Rows made by SQL: a Store opened by hand keeps its run folders under the working directory.)
    auto v5 = store::testing::open_postgres_at_schema_version(where.location, 5);
    v5.put_spec(k_hash, k_spec, "quickstart");
    for (const char* id : {"20261201-000000-00000a", "20261201-000000-00000b"}) {
      ids.emplace_back(id);
      where.execute(fmt::format(
          "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) VALUES ('{}', '{}', 'v5', '{}', "
          "'2026-12-01T00:00:00.000Z', 'runs/{}')",
          id, k_hash, ids.size() == 1 ? "completed" : "interrupted", id));
    }
    where.execute(
        "INSERT INTO metric_keys (name) VALUES ('loss'), ('lr'); "
        "INSERT INTO metrics (run_id, key_id, rank, step, value) "
        "SELECT r.id, k.id, rk.rank, s, CASE WHEN k.name = 'lr' THEN 0.05 WHEN s = 777 THEN 'NaN' "
        "WHEN s = 778 THEN 'Infinity' WHEN s = 779 THEN '-0' ELSE 2.5::float8 / s + rk.rank END "
        "FROM generate_series(1, " +
        std::to_string(k_steps) + ") s, runs r, metric_keys k, (VALUES (0), (1)) rk(rank)");
  }
  const std::string v5_schema = store::testing::describe_schema(where.location);
  // A migration that fails midway (a table named as one it creates is in the way): nothing changes.
  where.execute("CREATE TABLE metric_points (in_the_way integer)");
  CHECK_THROWS_WITH(where.open(), Catch::Contains("metric_points"));
  where.execute("DROP TABLE metric_points");
  CHECK(store::testing::describe_schema(where.location) == v5_schema);
  CHECK(where.query("SELECT version FROM expctl_schema") == "5");
  CHECK(where.query("SELECT count(*) FROM metrics") == std::to_string(2 * 2 * 2 * k_steps));

  auto db = where.open();
  CHECK(db.schema_version() == store::latest_schema_version(store::StoreKind::postgresql));
  CHECK(where.query("SELECT to_regclass('metrics') IS NULL") == "t");
  CHECK(where.query("SELECT count(*) FROM metric_chunks") == std::to_string(2 * 2 * 2 * 3));
  CHECK(where.query("SELECT count(*) FROM metric_points") == "0");
  CHECK(where.query("SELECT attstorage FROM pg_attribute WHERE attrelid = 'metric_chunks'::regclass AND attname = "
                    "'data'") == "m");
  for (const auto& id : ids) {
    const auto loss = db.series_columns(id, "loss");
    REQUIRE(loss.size() == 2);
    for (const auto& rank : loss) {
      REQUIRE(rank.steps.size() == static_cast<std::size_t>(k_steps));
      for (std::int64_t step = 1; step <= k_steps; ++step) {
        const auto i = static_cast<std::size_t>(step - 1);
        REQUIRE(rank.steps[i] == step);
        const double value = rank.values[i];
        if (step == 777) {
          REQUIRE(std::isnan(value));
        } else if (step == 778) {
          REQUIRE(value == std::numeric_limits<double>::infinity());
        } else if (step == 779) {
          REQUIRE(bits(value) == bits(-0.0));
        } else {
          REQUIRE(value == 2.5 / static_cast<double>(step) + rank.rank);
        }
      }
    }
    CHECK(db.metrics(id, {.name = "lr", .rank = 1}).back().value == 0.05);
    const auto aggregates = db.series_aggregates(id, "loss", 0);
    REQUIRE(aggregates.size() == 2);
    CHECK(aggregates[0].nan_count == 1);
    CHECK(aggregates[0].max == std::numeric_limits<double>::infinity());
    CHECK(db.metric_series(id).at(0).points == 2 * k_steps);
  }
  // The converted store takes new points: a resumed run continues its last, short chunk.
  db.append_metrics(ids[1], std::vector<MetricPoint>{{0, k_steps + 1, "loss", 1.0}});
  CHECK(db.series_columns(ids[1], "loss").at(0).steps.size() == static_cast<std::size_t>(k_steps + 1));
  CHECK(where.query("SELECT count(*) FROM metric_points") == std::to_string(1808 + 1));
}

TEST_CASE(
    "ship: the node's sealed chunks reach the server byte for byte, one row each, and a chunk sealed after its "
    "points were shipped replaces them",
    "[store][ship][chunks]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  auto team = server.open();
  const auto run = new_run(local);
  // 9 000 points a series (2 ranks x 2 metrics): 2 sealed chunks and 808 open points each.
  constexpr std::int64_t k_steps = 9'000;
  std::vector<MetricPoint> points;
  for (std::int64_t step = 0; step < k_steps; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      points.push_back({rank, step, "loss", std::bit_cast<double>(bits_at(step + rank))});
      points.push_back({rank, step, "lr", 0.05});
    }
  }
  local.append_metrics(run.id, points);
  const auto chunk_bytes = [&] {
    // Every chunk's bytes, sorted: the metric keys of the two stores differ.
    const std::string node_chunks = node.query(
        "SELECT coalesce(group_concat(h, ','), '') FROM (SELECT lower(hex(data)) AS h FROM metric_chunks ORDER BY 1)");
    const std::string server_chunks = server.query(
        "SELECT coalesce(string_agg(h, ',' ORDER BY h), '') FROM (SELECT encode(data, 'hex') AS h FROM "
        "metric_chunks) c");
    return std::pair(node_chunks, server_chunks);
  };
  const auto first = store::ship(local, team);
  CHECK(first.points_shipped == 4 * k_steps);
  CHECK(server.query("SELECT count(*) FROM metric_chunks") == "8");
  CHECK(server.query("SELECT count(*) FROM metric_points") == std::to_string(4 * (k_steps - 2 * 4096)));
  auto [node_chunks, server_chunks] = chunk_bytes();
  CHECK(!node_chunks.empty());
  CHECK(node_chunks == server_chunks);
  CHECK(store::ship(local, team).points_shipped == 0);

  // The run ends: the node seals its open points, and the next pass replaces the server's.
  local.finish_run(run.id, RunStatus::completed, 0, "");
  const auto last = store::ship(local, team);
  CHECK(last.points_shipped == 4 * (k_steps - 2 * 4096));
  CHECK(server.query("SELECT count(*) FROM metric_chunks") == "12");
  CHECK(server.query("SELECT count(*) FROM metric_points") == "0");
  std::tie(node_chunks, server_chunks) = chunk_bytes();
  CHECK(node_chunks == server_chunks);
  const auto columns = team.series_columns(run.id, "loss");
  REQUIRE(columns.size() == 2);
  for (const auto& rank : columns) {
    REQUIRE(rank.steps.size() == static_cast<std::size_t>(k_steps));
    for (std::int64_t step = 0; step < k_steps; ++step) {
      REQUIRE(bits(rank.values[static_cast<std::size_t>(step)]) == bits_at(step + rank.rank));
    }
  }
  CHECK(store::ship_lag(local, team).runs_behind == 0);
}
