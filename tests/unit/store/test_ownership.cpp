// Run ownership: a `running` run whose owner process is gone reads as `lost` and can be resumed.
#include <cerrno>
#include <cstdio>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"

using namespace expctl;
using store::RunStatus;
using test::StoreFixture;
namespace fs = std::filesystem;

namespace {

using std::chrono::minutes;
using std::chrono::seconds;

util::ProcessIdentity on_another_host() {
  util::ProcessIdentity other = util::ProcessIdentity::current();
  other.host += "-elsewhere";
  return other;
}

/// Sets columns of a run row directly (`assignments` is SQL, e.g. "heartbeat_at = NULL").
void set_columns(const StoreFixture& f, const std::string& run_id, const std::string& assignments) {
  store::testing::execute_sql(f.db_path, "UPDATE runs SET " + assignments + " WHERE id = '" + run_id + "'");
}

std::string utc_ago(store::Clock::duration age) {
  return store::format_utc(store::Clock::now() - age);
}

/// In a child process: opens the store at `db_path`, creates a run, writes its id to `fd` and
/// ends with _exit() without finishing the run, as a SIGKILLed supervisor would.
[[noreturn]] void create_run_and_vanish(const fs::path& db_path, const std::string& spec_hash, int fd) {
  int status = 1;
  try {
    auto db = store::Store::open(db_path);
    db.put_spec(spec_hash, test::k_canonical_spec, "quickstart");
    const std::string id = db.create_run({spec_hash, std::nullopt, "vanishing", std::nullopt}).id;
    status = ::write(fd, id.data(), id.size()) == static_cast<ssize_t>(id.size()) ? 0 : 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "child: %s\n", error.what());
  }
  ::_exit(status);
}

/// Forks create_run_and_vanish, reaps the child and returns the id of the run it left running.
std::string run_of_vanished_process(const fs::path& db_path, const std::string& spec_hash, pid_t& child_pid) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  child_pid = ::fork();
  REQUIRE(child_pid >= 0);
  if (child_pid == 0) {
    ::close(fds[0]);
    create_run_and_vanish(db_path, spec_hash, fds[1]);
  }
  ::close(fds[1]);
  char buffer[64] = {};
  const ssize_t got = ::read(fds[0], buffer, sizeof buffer - 1);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child_pid, &status, 0) < 0 && errno == EINTR) {
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got > 0);
  return std::string(buffer, static_cast<size_t>(got));
}

}  // namespace

TEST_CASE("ownership: derive_run_status tells running from lost by owner, boot and heartbeat age") {
  const auto now = store::Clock::now();
  const util::ProcessIdentity self = util::ProcessIdentity::current();
  const auto derive = [&](const std::optional<util::ProcessIdentity>& owner,
                          std::optional<store::Clock::time_point> heartbeat) {
    return store::derive_run_status(RunStatus::running, owner, heartbeat, now);
  };
  CHECK(derive(std::nullopt, std::nullopt) == RunStatus::running);  // old row: no owner recorded
  CHECK(derive(self, std::nullopt) == RunStatus::running);
  CHECK(derive(self, now - minutes(30)) == RunStatus::running);  // alive here: the heartbeat does not matter

  util::ProcessIdentity recycled = self;
  recycled.start_ticks += 1;
  CHECK(derive(recycled, now) == RunStatus::lost);
  util::ProcessIdentity rebooted = self;
  rebooted.boot_id = "00000000-0000-0000-0000-000000000000";
  CHECK(derive(rebooted, now) == RunStatus::lost);

  const util::ProcessIdentity remote = on_another_host();
  CHECK(derive(remote, now - seconds(5)) == RunStatus::running);
  CHECK(derive(remote, now - store::k_lost_after) == RunStatus::running);
  CHECK(derive(remote, now - store::k_lost_after - seconds(1)) == RunStatus::lost);
  CHECK(derive(remote, now + minutes(1)) == RunStatus::running);  // its clock is ahead of ours
  CHECK(derive(remote, std::nullopt) == RunStatus::running);

  for (const auto stored : {RunStatus::completed, RunStatus::failed, RunStatus::interrupted, RunStatus::diverged}) {
    CHECK(store::derive_run_status(stored, recycled, now - minutes(30), now) == stored);
  }
}

TEST_CASE("ownership: create_run records this process as owner and heartbeat moves heartbeat_at") {
  StoreFixture f;
  const auto self = util::ProcessIdentity::current();
  const auto run = f.new_run();
  CHECK(run.owner == std::optional<std::string>(self.host + ":" + std::to_string(self.pid)));
  REQUIRE(run.heartbeat_at.has_value());
  const auto stored = f.db.run(run.id).value();
  CHECK(stored.owner == run.owner);
  CHECK(stored.heartbeat_at == run.heartbeat_at);
  CHECK(stored.status == RunStatus::running);

  set_columns(f, run.id, "heartbeat_at = '2020-01-01T00:00:00.000Z'");
  f.db.heartbeat(run.id);
  const auto beat = store::parse_utc(f.db.run(run.id)->heartbeat_at.value()).value();
  CHECK(store::Clock::now() - beat < minutes(1));
  CHECK_THROWS_WITH(f.db.heartbeat("nosuchrun"), Catch::StartsWith("no run \"nosuchrun\" in "));
}

TEST_CASE("ownership: a run whose owning process exited without finishing it is lost and can be resumed") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string spec_hash = test::fake_spec_hash("vanish");
  pid_t child = 0;
  const std::string lost_id = run_of_vanished_process(db_path, spec_hash, child);

  auto db = store::Store::open(db_path);
  const auto lost = db.run(lost_id).value();
  CHECK(lost.status == RunStatus::lost);
  CHECK(lost.owner == std::optional<std::string>(util::ProcessIdentity::current().host + ":" + std::to_string(child)));
  CHECK(db.find_run(lost_id.substr(0, 20)).status == RunStatus::lost);
  const auto live = db.create_run({spec_hash, std::nullopt, "live", std::nullopt});

  const auto ids = [&](RunStatus status, std::size_t limit) {
    std::vector<std::string> out;
    for (const auto& run : db.list_runs({status, {}, "", limit})) {
      out.push_back(run.id);
    }
    return out;
  };
  CHECK(ids(RunStatus::lost, 0) == std::vector<std::string>{lost_id});
  CHECK(ids(RunStatus::running, 0) == std::vector<std::string>{live.id});
  CHECK(ids(RunStatus::running, 1) == std::vector<std::string>{live.id});  // the limit counts derived rows only
  CHECK(ids(RunStatus::lost, 1) == std::vector<std::string>{lost_id});

  CHECK_THROWS_WITH(db.resume_run(live.id), "run " + live.id +
                                                " is running: only an interrupted, failed, diverged or lost run "
                                                "can be resumed");
  db.resume_run(lost_id);
  const auto resumed = db.run(lost_id).value();
  CHECK(resumed.status == RunStatus::running);
  CHECK(resumed.owner == live.owner);  // this process owns it now
  CHECK(ids(RunStatus::lost, 0).empty());
  CHECK_THROWS_AS(db.resume_run(lost_id), util::StoreError);
}

TEST_CASE("ownership: a run of another host is lost once its heartbeat is older than k_lost_after") {
  StoreFixture f;
  const auto run = f.new_run();
  set_columns(f, run.id,
              "owner_host = '" + on_another_host().host + "', heartbeat_at = '" + utc_ago(seconds(10)) + "'");
  CHECK(f.db.run(run.id)->status == RunStatus::running);
  CHECK(f.db.run(run.id)->owner.value().find("-elsewhere:") != std::string::npos);
  CHECK_THROWS_AS(f.db.resume_run(run.id), util::StoreError);

  set_columns(f, run.id, "heartbeat_at = '" + utc_ago(store::k_lost_after + seconds(30)) + "'");
  CHECK(f.db.run(run.id)->status == RunStatus::lost);
  CHECK(f.db.list_runs({RunStatus::lost, {}, "", 0}).size() == 1);
  f.db.heartbeat(run.id);  // its supervisor speaks again
  CHECK(f.db.run(run.id)->status == RunStatus::running);
}

TEST_CASE("ownership: a run of this host from before its last boot is lost, a run with no owner stays running") {
  StoreFixture f;
  const auto rebooted = f.new_run();
  set_columns(f, rebooted.id, "owner_boot_id = '00000000-0000-0000-0000-000000000000'");
  CHECK(f.db.run(rebooted.id)->status == RunStatus::lost);
  f.db.resume_run(rebooted.id);
  CHECK(f.db.run(rebooted.id)->status == RunStatus::running);

  const auto legacy = f.new_run();
  set_columns(f, legacy.id,
              "owner_host = NULL, owner_pid = NULL, owner_boot_id = NULL, owner_start_ticks = NULL, "
              "heartbeat_at = NULL");
  const auto stored = f.db.run(legacy.id).value();
  CHECK(stored.status == RunStatus::running);
  CHECK_FALSE(stored.owner.has_value());
  CHECK_FALSE(stored.heartbeat_at.has_value());
}

TEST_CASE("ownership: a lost run lasted until its last heartbeat, a running one lasts until now") {
  store::RunRecord run;
  run.started_at = "2026-01-01T00:00:00.000Z";
  run.heartbeat_at = "2026-01-01T00:01:30.000Z";
  const auto now = store::parse_utc("2026-01-01T01:00:00.000Z").value();
  run.status = RunStatus::lost;
  CHECK(run.duration_seconds(now) == 90.0);
  run.status = RunStatus::running;
  CHECK(run.duration_seconds(now) == 3600.0);
  run.status = RunStatus::failed;
  run.ended_at = "2026-01-01T00:00:10.000Z";
  CHECK(run.duration_seconds(now) == 10.0);
}
