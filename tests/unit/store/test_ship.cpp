// The shipper (store/ship.hpp): a node-local SQLite store into a PostgreSQL store, idempotently,
// surviving a killed shipper and a server that goes away.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "backend_fixture.hpp"

#include "expctl/store/ship.hpp"
#include "expctl/util/subprocess.hpp"

using namespace expctl;
using store::MetricPoint;
using store::RunStatus;
using test::BackendStore;
namespace fs = std::filesystem;

namespace {

const std::string& k_spec = test::k_contract_spec;
const std::string& k_hash = test::k_contract_hash;

/// A local store with `runs` completed runs of `ranks` x `metrics` series over `steps` steps.
std::vector<std::string> record_runs(store::Store& db, int runs, int ranks, int metrics, int steps) {
  db.put_spec(k_hash, k_spec, "quickstart");
  db.put_environment("env-a", R"({"host":"a"})");
  std::vector<std::string> ids;
  for (int r = 0; r < runs; ++r) {
    const auto run = db.create_run({k_hash, std::string("env-a"), "q", std::nullopt});
    std::vector<MetricPoint> points;
    for (int rank = 0; rank < ranks; ++rank) {
      db.add_rank(run.id, {.rank = rank, .host = "a", .environment_hash = std::string("env-a")});
      for (int m = 0; m < metrics; ++m) {
        for (int step = 1; step <= steps; ++step) {
          points.push_back({rank, step, "metric" + std::to_string(m), step == 7 ? std::nan("") : step * 0.25 + m});
        }
      }
    }
    db.append_metrics(run.id, points);
    db.add_artifact(run.id, {"checkpoints/last.pt", std::string(64, 'f'), 123});
    db.add_tag(run.id, "nightly");
    for (int rank = 0; rank < ranks; ++rank) {
      db.update_rank(run.id, rank, RunStatus::completed, 0, std::nullopt);
    }
    db.set_summary(run.id, R"({"final_train_loss":0.5})");
    db.finish_run(run.id, RunStatus::completed, 0, "");
    ids.push_back(run.id);
  }
  return ids;
}

/// The server holds exactly what `local` holds: runs, and per run, rank and metric the same
/// points with the same values (NaN included).
void check_same(store::Store& local, store::Store& server) {
  const auto local_runs = local.list_runs();
  const auto server_runs = server.list_runs();
  REQUIRE(server_runs.size() == local_runs.size());
  for (std::size_t i = 0; i < local_runs.size(); ++i) {
    INFO("run " << local_runs[i].id);
    CHECK(server_runs[i].id == local_runs[i].id);
    CHECK(server_runs[i].status == local_runs[i].status);
    CHECK(server_runs[i].summary_json == local_runs[i].summary_json);
    CHECK(server_runs[i].tags == local_runs[i].tags);
    CHECK(server.ranks(local_runs[i].id).size() == local.ranks(local_runs[i].id).size());
    CHECK(server.artifacts(local_runs[i].id).size() == local.artifacts(local_runs[i].id).size());
    const auto want = local.metrics(local_runs[i].id);
    const auto have = server.metrics(local_runs[i].id);
    REQUIRE(have.size() == want.size());
    for (std::size_t p = 0; p < want.size(); ++p) {
      if (have[p].name != want[p].name || have[p].rank != want[p].rank || have[p].step != want[p].step ||
          !(have[p].value == want[p].value || (std::isnan(have[p].value) && std::isnan(want[p].value)))) {
        FAIL("point " << p << " differs: " << have[p].name << "/" << have[p].rank << "/" << have[p].step);
      }
    }
  }
}

util::SubprocessResult shell(const std::vector<std::string>& argv) {
  auto result = util::run_capture(argv, {.timeout = std::chrono::minutes(2)});
  REQUIRE(result.has_value());
  return *result;
}

std::int64_t server_points(const BackendStore& server) {
  return std::stoll(store::testing::query_postgres(server.location, store::testing::postgres_points_sql()));
}

}  // namespace

TEST_CASE("ship: a store shipped twice, and a merged copy shipped by another node, changes nothing the second time",
          "[store][ship]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  record_runs(local, 3, 2, 3, 40);
  auto team = server.open();

  const auto first = store::ship(local, team, {.batch_points = 100});
  CHECK(first.runs_shipped == 3);
  CHECK(first.points_shipped == 3 * 2 * 3 * 40);
  // 240 points a run, six chunks of 40 (the runs ended), in batches of at most 100 points: a
  // chunk is never split, so two chunks a batch.
  CHECK(first.batches == 9);
  check_same(local, team);
  CHECK(store::ship_lag(local, team).runs_behind == 0);

  const auto second = store::ship(local, team);
  CHECK(second.runs_considered == 3);
  CHECK(second.runs_shipped == 0);
  CHECK(second.points_shipped == 0);

  // Another node holding a copy of the same runs (merged from this one) ships it: no change.
  BackendStore other(store::StoreKind::sqlite);
  auto copy = other.open();
  store::merge_store(copy, local.path());
  CHECK(store::ship(copy, team).points_shipped == 0);
  CHECK(server_points(server) == 3 * 2 * 3 * 40);
  check_same(local, team);

  // A server that lost its shipping progress (but not the points) still has the chunks, which say
  // what it holds: the runs' rows go again, no point goes twice, nothing doubles.
  server.execute("DELETE FROM ship_progress; DELETE FROM ship_state");
  const auto again = store::ship(local, team, {.batch_points = 100});
  CHECK(again.runs_shipped == 3);
  CHECK(again.points_shipped == 0);
  CHECK(server_points(server) == 3 * 2 * 3 * 40);
  check_same(local, team);
  // One that lost a run's chunks too gets them again, and only them.
  server.execute("DELETE FROM ship_state; DELETE FROM metric_chunks WHERE rank = 1");
  CHECK(store::ship(local, team, {.batch_points = 100}).points_shipped == 3 * 3 * 40);
  CHECK(server_points(server) == 3 * 2 * 3 * 40);
  check_same(local, team);

  // A tag added after the run ended is shipped by the next pass.
  local.add_tag(local.list_runs().front().id, "baseline");
  CHECK(store::ship_lag(local, team).runs_behind == 1);
  CHECK(store::ship(local, team).runs_shipped == 1);
  check_same(local, team);
}

TEST_CASE("ship: every series is found, however the keys and ranks are spread", "[store][ship]") {
  // The shipper finds a run's (key, rank) series by seeking from one key to the next and from one
  // rank to the next within a key: ranks with gaps, a key only one rank logged, a key with one
  // point, and keys whose local ids are not in name order must all arrive.
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto run = local.create_run({k_hash, std::nullopt, "uneven", std::nullopt});
  std::vector<MetricPoint> points;
  for (const int rank : {0, 2, 5}) {
    for (int step = 1; step <= 30; ++step) points.push_back({rank, step, "z_loss", step * 0.5});
  }
  points.push_back({3, 9, "a_once", 1.0});
  for (int step = -4; step <= 4; ++step) points.push_back({7, step, "m_only_rank_7", step * 1.0});
  for (const int rank : {1, 0}) {
    for (int step = 1; step <= 12; ++step) points.push_back({rank, step * 100, "b_sparse", step * 2.0});
  }
  local.append_metrics(run.id, points);
  auto team = server.open();
  CHECK(store::ship_lag(local, team).points_behind == static_cast<std::int64_t>(points.size()));
  CHECK(store::ship(local, team, {.batch_points = 7}).points_shipped == static_cast<std::int64_t>(points.size()));
  check_same(local, team);
  CHECK(store::ship_lag(local, team).points_behind == 0);
}

TEST_CASE("ship: the first ship into a server that never analysed its series tables analyses them", "[store][ship]") {
  // Without statistics the planner reads a long series by bitmap scan and an on-disk sort instead
  // of in index order; autovacuum would analyse the table a minute or more later.
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  const auto analysed = [&] {
    return store::testing::query_postgres(
        server.location,
        "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relid = 'metric_chunks'::regclass");
  };
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  auto team = server.open();
  CHECK(analysed() == "f");
  CHECK(store::ship(local, team).points_shipped == 0);  // nothing shipped: nothing to analyse
  CHECK(analysed() == "f");
  record_runs(local, 1, 1, 2, 10);
  CHECK(store::ship(local, team).points_shipped == 20);
  CHECK(analysed() == "t");
}

TEST_CASE("ship: a background shipper whose server is away retries after 1 s, then 2 s, 4 s ..., not at once",
          "[store][ship]") {
  // A server that is not there: a socket folder without a server in it. Before this test the
  // retry wait was half of 1 s in whole seconds, 0: the shipper retried ~1 000 times a second and
  // took a core from the training beside it (quick start: 1.7x the step time).
  BackendStore node(store::StoreKind::sqlite);
  {
    auto local = node.open();
    record_runs(local, 1, 1, 1, 5);
  }
  const fs::path away = node.dir / "no-server";
  fs::create_directories(away);
  std::vector<std::string> notes;
  std::mutex notes_mutex;
  std::int64_t failed = 0;
  {
    store::BackgroundShipper shipper(node.location, "host=" + away.string() + " port=5432 user=expctl dbname=expctl",
                                     [&](const std::string& note) {
                                       std::lock_guard lock(notes_mutex);
                                       notes.push_back(note);
                                     });
    // Passes fail at f1, then f1 + 1 s, f1 + 3 s, f1 + 7 s ... (waits of 1, 2, 4 s), and f1 comes
    // after `started`: at any moment t, at most 1 + floor(log2(t - started + 1 s)) passes have
    // failed. Read against the test's own start, the bound holds however late this thread polls
    // (a load only delays passes); a retry at once, or after half the wait, exceeds it.
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + std::chrono::seconds(10) * test::timeout_scale();
    std::int64_t seen = 0;
    std::int64_t most = 0;  // the most passes seen over the bound
    while (seen < 3 && std::chrono::steady_clock::now() < deadline) {
      seen = shipper.failed_passes();
      const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const auto bound = 1 + static_cast<std::int64_t>(std::floor(std::log2(elapsed_s + 1.0)));
      most = std::max(most, seen - bound);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    failed = shipper.failed_passes();
    CHECK(shipper.problem().has_value());
    REQUIRE(seen >= 3);
    CHECK(most <= 0);  // never more passes than the waits of 1 s, 2 s, 4 s ... allow
  }
  // Nothing between them: the 4th pass is due 4 s after the 3rd.
  CHECK(failed == 3);
  std::lock_guard lock(notes_mutex);
  REQUIRE(notes.size() == 1);  // said once, not once a pass
  CHECK_THAT(notes[0], Catch::Contains("cannot ship to the team store now"));
}

TEST_CASE("ship: a foreground shipper reports each pass, the first failure once, and stop() ends its wait at once",
          "[store][ship]") {
  BackendStore node(store::StoreKind::sqlite);
  {
    auto local = node.open();
    record_runs(local, 1, 1, 1, 5);
  }
  const fs::path away = node.dir / "no-server";
  fs::create_directories(away);
  std::vector<store::BackgroundShipper::Pass> passes;
  std::mutex passes_mutex;
  store::BackgroundShipper shipper(
      store::BackgroundShipper::foreground, node.location,
      "host=" + away.string() + " port=5432 user=expctl dbname=expctl",
      [&](const store::BackgroundShipper::Pass& pass) {
        std::lock_guard lock(passes_mutex);
        passes.push_back(pass);
      },
      std::chrono::hours(1));
  std::thread stopper([&] {
    // After the passes at 0 s and 1 s; the next waits until 3 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    shipper.stop();
  });
  const auto started = std::chrono::steady_clock::now();
  const store::ShipReport shipped = shipper.follow();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  stopper.join();
  // Not after the hour's interval (nor, unstretched, at the 3 s pass); EXPCTL_TEST_TIMEOUT_SCALE: the asan preset.
  const char* scale = std::getenv("EXPCTL_TEST_TIMEOUT_SCALE");
  CHECK(took < 2.5 * (scale != nullptr && std::atoi(scale) > 1 ? std::atoi(scale) : 1));
  CHECK(shipped.points_shipped == 0);
  std::lock_guard lock(passes_mutex);
  REQUIRE(passes.size() >= 2);
  CHECK(passes[0].problem.has_value());
  CHECK(passes[0].first_failure);
  CHECK_FALSE(passes[1].first_failure);  // said once, not once a pass
}

TEST_CASE("ship: a running run is shipped as far as it goes, then caught up when it ends", "[store][ship]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  auto team = server.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
  local.append_metrics(run.id, std::vector<MetricPoint>{{0, 1, "loss", 1.0}, {0, 2, "loss", 0.5}});
  store::ship(local, team);
  CHECK(team.run(run.id)->status == RunStatus::running);
  CHECK(team.metrics(run.id).size() == 2);
  CHECK(store::ship_lag(local, team).runs_behind == 1);  // a running run is never shipped whole

  // The server holds the open chunk as points, as the node does.
  CHECK(server.query("SELECT count(*) FROM metric_points") == "2");
  CHECK(server.query("SELECT count(*) FROM metric_chunks") == "0");

  local.append_metrics(run.id, std::vector<MetricPoint>{{0, 3, "loss", 0.25}, {1, 1, "loss", 1.5}});
  local.finish_run(run.id, RunStatus::completed, 0, "");
  // The run ended, so its series were sealed on the node: the chunks go, and replace the points the
  // server had of their steps (3 + 1 points, in one transaction).
  const auto last = store::ship(local, team);
  CHECK(last.points_shipped == 4);
  check_same(local, team);
  CHECK(server.query("SELECT count(*) FROM metric_points") == "0");
  CHECK(server.query("SELECT count(*) FROM metric_chunks") == "2");
  CHECK(server_points(server) == 4);
  CHECK(store::ship_lag(local, team).runs_behind == 0);
}

TEST_CASE("ship: a shipper SIGKILLed mid-batch loses nothing and duplicates nothing", "[store][ship]") {
  if (!test::test_postgres())
    return;
  BackendStore node(store::StoreKind::sqlite);
  {
    auto local = node.open();
    record_runs(local, 2, 4, 8, 2000);  // 128 000 points
  }
  // The kill must land mid-pass. A batch takes milliseconds, so a parent descheduled on a loaded
  // machine could see the whole pass finish first: the child runs at nice 19 (the parent, waking
  // every 2 ms, goes first), and an attempt whose pass ended before the kill is made again on a
  // fresh schema, up to 3 times. That case says nothing about the product, only about the timing.
  for (int attempt = 1; attempt <= 3; ++attempt) {
    CAPTURE(attempt);
    BackendStore server(store::StoreKind::postgresql);
    REQUIRE(server.available);
    server.open();  // the schema, before the child races to create it
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      (void)::nice(19);
      try {
        auto local = node.open(store::OpenMode::read_only);
        auto team = server.open();
        store::ship(local, team, {.batch_points = 500});
      } catch (...) {
      }
      ::_exit(0);
    }
    // Killed once some batches are in, in the middle of the pass (inside one batch or between two:
    // both must leave a consistent server).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60) * test::timeout_scale();
    while (server_points(server) < 20'000 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    const auto at_kill = server_points(server);
    REQUIRE(at_kill >= 20'000);
    if (at_kill == 128'000) {
      continue;  // the pass ended before the kill: try again
    }
    CHECK(at_kill < 128'000);

    auto local = node.open(store::OpenMode::read_only);
    auto team = server.open();
    CHECK(store::ship_lag(local, team).points_behind == 128'000 - at_kill);
    store::ship(local, team);
    CHECK(server_points(server) == 128'000);
    check_same(local, team);
    return;
  }
  FAIL("in 3 attempts the whole pass ended before the kill: the kill never landed mid-pass");
}

TEST_CASE("ship: the server stopped mid-run and restarted: the background shipper catches up with exactly the "
          "node's points",
          "[store][ship][fault]") {
  if (!test::test_postgres()) return;
  // A server of its own: stopping the shared one would fail the tests running beside this one.
  const test::TempDir scratch;
  // Not inside `scratch` (mode 0700, root's): the server runs as the postgres user.
  const fs::path pg_dir = fs::temp_directory_path() / fmt::format("expctl-pg-{}-{}", ::getpid(), std::random_device{}());
  const std::string script = (test::source_dir() / "scripts" / "pg-throwaway.sh").string();
  const auto started = shell({script, "start", pg_dir.string()});
  REQUIRE(started.exit_code == 0);
  struct Stop {
    std::string script, dir;
    ~Stop() { (void)util::run_capture({script, "stop", dir}); }
  } stop{script, pg_dir.string()};
  std::string conninfo = started.out;
  conninfo.erase(conninfo.find_last_not_of('\n') + 1);

  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
  std::vector<std::string> notes;
  std::mutex notes_mutex;
  {
    store::BackgroundShipper shipper(node.location, conninfo, [&](const std::string& note) {
      std::lock_guard lock(notes_mutex);
      notes.push_back(note);
    }, std::chrono::milliseconds(100));
    std::int64_t step = 0;
    const auto write_steps = [&](int count) {
      for (int i = 0; i < count; ++i, ++step) {
        local.append_metrics(run.id, std::vector<MetricPoint>{{0, step, "loss", 1.0 / (step + 1)},
                                                              {1, step, "loss", 2.0 / (step + 1)}});
      }
    };
    write_steps(200);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    REQUIRE(shell({script, "pg_ctl", pg_dir.string(), "-m", "immediate", "-w", "stop"}).exit_code == 0);
    write_steps(300);  // the run goes on while the server is away
    std::this_thread::sleep_for(std::chrono::seconds(3));
    REQUIRE(shell({script, "pg_ctl", pg_dir.string(), "-l", (pg_dir / "server.log").string(), "-w",
                               "start"})
                .exit_code == 0);
    write_steps(100);
    local.finish_run(run.id, RunStatus::completed, 0, "");
    // Caught up within 60 s of the restart (backoff is at most 30 s).
    auto team = store::Store::open(conninfo, store::OpenMode::read_only, {.runs_root = scratch / "runs"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (store::ship_lag(local, team).runs_behind > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    CHECK(store::ship_lag(local, team).runs_behind == 0);
  }
  auto team = store::Store::open(conninfo, store::OpenMode::read_only, {.runs_root = scratch / "runs"});
  check_same(local, team);
  CHECK(team.metrics(run.id).size() == 1200);
  std::lock_guard lock(notes_mutex);
  REQUIRE(notes.size() >= 2);
  CHECK_THAT(notes.front(), Catch::Contains("cannot ship to the team store now") &&
                                Catch::Contains("training goes on"));
  CHECK_THAT(notes.back(), Catch::Contains("works again"));
}
