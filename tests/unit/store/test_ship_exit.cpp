// The shipper at a run's end and under a reader's eyes (issue 49, items 1-3): a run is `lost` on
// the server only when its node says so, its final state arrives with its last points, and a
// run's exit makes one last pass whatever the backoff was waiting for.
#include <csignal>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "backend_fixture.hpp"

#include "expctl/store/ship.hpp"
#include "expctl/store/ship_pending.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/subprocess.hpp"

using namespace expctl;
using store::MetricPoint;
using store::RunStatus;
using test::BackendStore;
namespace fs = std::filesystem;

namespace {

const std::string& k_spec = test::k_contract_spec;
const std::string& k_hash = test::k_contract_hash;

/// A child process that sleeps until killed: an owner that is alive, then gone.
struct Owner {
  pid_t pid = ::fork();
  Owner() {
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  ~Owner() { end(); }
  void end() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  /// Makes `run_id`'s row in the node's store owned by this process (as `expctl run` owns its run).
  void own(const BackendStore& node, const std::string& run_id) const {
    const auto stat = util::read_proc_stat(pid);
    REQUIRE(stat.has_value());
    node.execute(fmt::format("UPDATE runs SET owner_pid = {}, owner_start_ticks = {} WHERE id = '{}'", pid,
                             stat->start_ticks, run_id));
  }
};

std::int64_t count_on(const BackendStore& server, const std::string& sql) {
  return std::stoll(store::testing::query_postgres(server.location, sql));
}

}  // namespace

TEST_CASE(
    "ship: a run whose expctl is gone but whose end the node has not shipped reads as running on the "
    "server, not lost, and lost only when the node says so",
    "[store][ship]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  auto team = server.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
  local.append_metrics(run.id, std::vector<MetricPoint>{{0, 1, "loss", 1.0}});
  Owner owner;
  owner.own(node, run.id);
  store::ship(local, team);  // shipped while it ran
  CHECK(team.run(run.id)->status == RunStatus::running);

  // Its expctl ends (it completed while the server was away: the node has not shipped that yet).
  owner.end();
  // Before: the server saw a dead owner and said `lost`, though the node holds the whole run.
  CHECK(team.run(run.id)->status == RunStatus::running);
  CHECK(team.list_runs({.status = RunStatus::lost}).empty());
  const auto shipped = store::shipped_run(team, run.id);
  REQUIRE(shipped.has_value());
  CHECK_FALSE(shipped->complete);

  SECTION("the node ships how it ended") {
    local.finish_run(run.id, RunStatus::completed, 0, "");
    store::ship(local, team);
    CHECK(team.run(run.id)->status == RunStatus::completed);
  }
  SECTION("the node finds its expctl gone (lost) and ships that word") {
    CHECK(local.run(run.id)->status == RunStatus::lost);
    store::ship(local, team);
    CHECK(team.run(run.id)->status == RunStatus::lost);
    CHECK(team.list_runs({.status = RunStatus::lost}).size() == 1);
    CHECK(store::shipped_run(team, run.id)->lost);
    CHECK(store::ship_lag(local, team).runs_behind == 0);
    // Resumed on the node: running again, and so on the server after the next pass.
    local.resume_run(run.id);
    store::ship(local, team);
    CHECK(team.run(run.id)->status == RunStatus::running);
    CHECK_FALSE(store::shipped_run(team, run.id)->lost);
  }
}

TEST_CASE("ship: a reader of the server never sees a run ended with points missing", "[store][ship]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  BackendStore node(store::StoreKind::sqlite);
  constexpr int k_points = 40'000;
  std::string run_id;
  {
    auto local = node.open();
    local.put_spec(k_hash, k_spec, "quickstart");
    const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
    std::vector<MetricPoint> points;
    for (int step = 0; step < k_points / 4; ++step) {
      for (int rank = 0; rank < 4; ++rank) {
        points.push_back({rank, step, "loss", 1.0 / (step + 1)});
      }
    }
    local.append_metrics(run.id, points);
    local.finish_run(run.id, RunStatus::completed, 0, "");
    run_id = run.id;
    server.open();  // the schema, before the reader looks
  }
  std::atomic<bool> done{false};
  std::int64_t seen_ended_short = -1;
  std::thread reader([&] {
    while (!done) {
      // One statement, one snapshot: the run's status and its points together.
      const std::string row = store::testing::query_postgres(
          server.location, "SELECT coalesce((SELECT status FROM runs WHERE id = '" + run_id +
                               "'), 'none') || ' ' || (" + store::testing::postgres_points_sql() + ")");
      const auto space = row.find(' ');
      const std::int64_t points = std::stoll(row.substr(space + 1));
      if (row.substr(0, space) == "completed" && points < k_points) {
        seen_ended_short = points;
      }
    }
  });
  {
    auto local = node.open(store::OpenMode::read_only);
    auto team = server.open();
    store::ship(local, team, {.batch_points = 500});
  }
  done = true;
  reader.join();
  INFO("the server said completed with " << seen_ended_short << " of " << k_points << " points");
  CHECK(seen_ended_short == -1);
  CHECK(count_on(server, store::testing::postgres_points_sql()) == k_points);
}

TEST_CASE(
    "ship: a run's exit makes one last pass whatever the backoff waits for, and says what is left when the "
    "server is away",
    "[store][ship][fault]") {
  if (!test::test_postgres())
    return;
  // A server of its own: stopping the shared one would fail the tests running beside this one.
  const fs::path pg_dir =
      fs::temp_directory_path() / fmt::format("expctl-pg-{}-{}", ::getpid(), std::random_device{}());
  const std::string script = (test::source_dir() / "scripts" / "pg-throwaway.sh").string();
  const auto shell = [](const std::vector<std::string>& argv) {
    auto result = util::run_capture(argv, {.timeout = std::chrono::minutes(2)});
    REQUIRE(result.has_value());
    return *result;
  };
  const auto started = shell({script, "start", pg_dir.string()});
  REQUIRE(started.exit_code == 0);
  struct Stop {
    std::string script, dir;
    ~Stop() { (void)util::run_capture({script, "stop", dir}); }
  } stop{script, pg_dir.string()};
  const std::string conninfo = started.out.substr(0, started.out.find('\n'));
  const auto server_stop = [&] {
    REQUIRE(shell({script, "pg_ctl", pg_dir.string(), "-m", "immediate", "-w", "stop"}).exit_code == 0);
  };
  const auto server_start = [&] {
    REQUIRE(
        shell({script, "pg_ctl", pg_dir.string(), "-l", (pg_dir / "server.log").string(), "-w", "start"}).exit_code ==
        0);
  };
  const test::TempDir scratch;
  const auto open_team = [&] {
    return store::Store::open(conninfo, store::OpenMode::read_only, {.runs_root = scratch / "runs"});
  };

  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto write_steps = [&](const std::string& run_id, int from, int count) {
    std::vector<MetricPoint> points;
    for (int step = from; step < from + count; ++step) {
      points.push_back({0, step, "loss", 1.0 / (step + 1)});
      points.push_back({1, step, "loss", 2.0 / (step + 1)});
    }
    local.append_metrics(run_id, points);
  };

  SECTION("a short outage near the end: the server is back before the run ends, the exit's pass ships the rest") {
    const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
    store::BackgroundShipper shipper(node.location, conninfo, {}, std::chrono::milliseconds(200),
                                     std::chrono::seconds(5));
    write_steps(run.id, 0, 100);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    server_stop();
    write_steps(run.id, 100, 500);
    // Long enough for the backoff to grow past what is left of the run (1, 2, 4, 8 s ...).
    std::this_thread::sleep_for(std::chrono::seconds(8));
    server_start();
    write_steps(run.id, 600, 50);
    local.finish_run(run.id, RunStatus::completed, 0, "");
    const auto exit_started = std::chrono::steady_clock::now();
    const auto left = shipper.finish();
    const double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - exit_started).count();
    WARN("the exit's last pass took " << exit_s << " s; the server was exact when it returned");
    CHECK(left.caught_up());
    CHECK(exit_s < 10.0);
    auto team = open_team();
    CHECK(team.run(run.id)->status == RunStatus::completed);
    CHECK(team.metrics(run.id).size() == 1300);  // exact at the exit: before, 200 until someone typed sync
  }
  SECTION("the server away at the end: the exit says how much is left, and ship_pending sends it once it is back") {
    const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
    store::BackgroundShipper shipper(node.location, conninfo, {}, std::chrono::milliseconds(200),
                                     std::chrono::milliseconds(1500));
    write_steps(run.id, 0, 100);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    server_stop();
    write_steps(run.id, 100, 100);
    local.finish_run(run.id, RunStatus::completed, 0, "");
    const auto exit_started = std::chrono::steady_clock::now();
    const auto left = shipper.finish();
    const double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - exit_started).count();
    CHECK(exit_s < 5.0);  // bounded by final_wait (1.5 s here), not by the server
    CHECK_FALSE(left.caught_up());
    CHECK_FALSE(left.exact);
    CHECK(left.runs_behind == 1);
    CHECK(left.points_behind == 400);  // the run's points, an upper bound
    REQUIRE(left.problem.has_value());

    store::mark_pending(node.location, "test");
    server_start();
    const auto pass = store::ship_pending(node.location, conninfo, {.runs_root = scratch / "runs"});
    CHECK(pass.ran);
    CHECK(pass.lag.runs_behind == 0);
    CHECK_FALSE(store::has_pending(node.location));
    auto team = open_team();
    CHECK(team.run(run.id)->status == RunStatus::completed);
    CHECK(team.metrics(run.id).size() == 400);
  }
}

TEST_CASE(
    "ship: points logged late, or a step logged again, after the series was shipped reach the server once "
    "with the node's value",
    "[store][ship]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  BackendStore node(store::StoreKind::sqlite);
  auto local = node.open();
  auto team = server.open();
  local.put_spec(k_hash, k_spec, "quickstart");
  const auto run = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
  std::vector<MetricPoint> points;
  for (int step = 1; step <= 10; ++step) {
    points.push_back({0, step, "loss", 1.0 / step});
  }
  local.append_metrics(run.id, points);
  store::ship(local, team);
  CHECK(team.metrics(run.id).size() == 10);

  // A program logs step 0 late, re-logs step 5 with another value (as a resume re-logs the steps
  // after its checkpoint), and goes on at step 11. Before, only step 11 ever reached the server.
  local.append_metrics(run.id,
                       std::vector<MetricPoint>{{0, 0, "loss", 7.0}, {0, 5, "loss", 99.0}, {0, 11, "loss", 0.05}});
  CHECK(store::ship_lag(local, team).points_behind > 0);
  const auto report = store::ship(local, team);
  CHECK(report.points_shipped >= 3);
  const auto shipped = team.metrics(run.id);
  REQUIRE(shipped.size() == 12);
  CHECK(shipped.front().step == 0);
  CHECK(shipped.front().value == 7.0);
  CHECK(shipped[5].step == 5);
  CHECK(shipped[5].value == 99.0);
  CHECK(store::ship_lag(local, team).points_behind == 0);
  // Once: the next pass sends nothing again.
  CHECK(store::ship(local, team).points_shipped == 0);

  SECTION("a series new to the server takes the node's rewrites with it, and is not sent twice") {
    const auto other = local.create_run({k_hash, std::nullopt, "q", std::nullopt});
    local.append_metrics(other.id, std::vector<MetricPoint>{{0, 2, "loss", 2.0}});
    local.append_metrics(other.id, std::vector<MetricPoint>{{0, 1, "loss", 1.0}});  // late, before any ship
    CHECK(store::ship(local, team).points_shipped == 2);
    CHECK(store::ship(local, team).points_shipped == 0);
    CHECK(team.metrics(other.id).size() == 2);
  }
}
