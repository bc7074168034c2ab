// Faults that real clusters produce, each ending in a recorded, resumable or explained state: a
// diverging loss, a killed supervisor, corrupt or uneven checkpoints, a locked store, a full disk,
// a stopped rank, a rendezvous that never completes. The real binary runs real processes; every
// process, mount and lock made here is undone here, and nothing is killed by name.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <cmath>

#include "cli/run_helpers.hpp"
#include "expctl/run/forensics.hpp"
#include "expctl/store/ship.hpp"
#include "unit/store/backend_fixture.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using expctl::test::run_expctl;

namespace {

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

/// The run arguments of a long run (ended by the test): no evaluation, a checkpoint every 50 steps.
std::vector<std::string> long_run(const std::vector<std::string>& more = {}) {
  return with({"run", tiny_spec(), "--set", "train.max_steps=100000", "--set", "train.eval_every=0", "--set",
               "train.checkpoint_every=50"},
              more);
}

json run_json_of(const RunDir& d, const std::string& id) {
  const auto shown = d.expctl({"show", id, "--format", "json"});
  INFO(shown.out << shown.err);
  REQUIRE(shown.exit_code == 0);
  return json::parse(shown.out).at("run");
}

}  // namespace

TEST_CASE("faults: a diverging loss ends the run diverged with its step, every step before it stored") {
  RunDir d;
  const auto result = d.expctl({"run", tiny_spec(), "--format", "json", "--set", "optim.lr=10", "--set",
                                "optim.momentum=0.99", "--set", "train.max_steps=100", "--set", "train.eval_every=0"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  const json document = json::parse(result.out);
  CHECK(document.at("run").at("status") == "diverged");
  const std::string cause = document.at("run").at("root_cause");
  CHECK_THAT(cause, Catch::StartsWith("the loss is not finite at step "));
  CHECK_THAT(cause, Catch::Contains("train.nonfinite=skip"));
  const auto step = std::stoll(cause.substr(std::string("the loss is not finite at step ").size()));
  const auto losses = d.open().metrics(document.at("run").at("id"), {.name = "loss", .rank = 0});
  REQUIRE(static_cast<std::int64_t>(losses.size()) == step);
  for (std::size_t i = 0; i + 1 < losses.size(); ++i) {
    CHECK(std::isfinite(losses[i].value));
  }
  CHECK_FALSE(std::isfinite(losses.back().value));
  const auto resumed = d.expctl({"resume", document.at("run").at("id")});
  CHECK(resumed.exit_code == 2);
  CHECK_THAT(resumed.err, Catch::Contains("diverged") && Catch::Contains("start a new run"));
}

TEST_CASE("faults: with train.nonfinite=skip the non-finite steps are skipped and the run completes") {
  RunDir d;
  const auto result =
      d.expctl({"run", tiny_spec(), "--format", "json", "--set", "optim.lr=10", "--set", "optim.momentum=0.99",
                "--set", "train.max_steps=60", "--set", "train.eval_every=0", "--set", "train.nonfinite=skip"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  const json document = json::parse(result.out);
  CHECK(document.at("run").at("status") == "completed");
  CHECK(document.at("summary").at("skipped_steps").get<int>() > 0);
}

namespace {

/// The single-node rendezvous files (run/rendezvous.hpp) in `tmp` of the supervisor with process id `pid`.
std::vector<fs::path> rendezvous_files_of(pid_t pid, const fs::path& tmp) {
  std::vector<fs::path> files;
  const std::string marker = "-" + std::to_string(pid) + "-";
  for (const auto& entry : fs::directory_iterator(tmp)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("expctl-rendezvous-") && name.find(marker) != std::string::npos) {
      files.push_back(entry.path());
    }
  }
  return files;
}

}  // namespace

namespace {

/// Starts `argv` (an `expctl run`), SIGKILLs the supervisor once rank 0 trains and waits until its
/// ranks are gone; returns the run id and the killed supervisor's pid.
std::pair<std::string, pid_t> kill_supervisor_while_training(const RunDir& d, const std::vector<std::string>& argv) {
  Background expctl(argv, d.dir / "killed");
  const pid_t killed_pid = expctl.pid();
  const auto run = start_training(d);
  const pid_t rank0 = rank_pid(run, 0);
  const pid_t rank1 = rank_pid(run, 1);
  REQUIRE(::kill(expctl.pid(), SIGKILL) == 0);
  CHECK(expctl.wait() == 128 + SIGKILL);
  CHECK(eventually([&] { return process_gone(rank0) && process_gone(rank1); }, std::chrono::seconds(10)));
  return {run.id, killed_pid};
}

}  // namespace

TEST_CASE("faults: a SIGKILLed supervisor leaves a lost run that resume accepts") {
  RunDir d;
  // The rendezvous file goes to a TMPDIR of this test's own: any run another test starts meanwhile
  // (ctest -j) sweeps the shared /tmp of orphaned files, the killed supervisor's among them.
  const fs::path tmp = d.dir / "tmp";
  fs::create_directories(tmp);
  const auto with_tmp = [&tmp](std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/bin/env", "TMPDIR=" + tmp.string()});  // env execs: the same pid
    return argv;
  };
  const auto [id, killed_pid] = kill_supervisor_while_training(d, with_tmp(d.argv(long_run())));
  const json lost = run_json_of(d, id);
  CHECK(lost.at("status") == "lost");
  CHECK_THAT(lost.at("owner").get<std::string>(), Catch::EndsWith(":" + std::to_string(killed_pid)));
  const auto shown = d.expctl({"show", id});
  CHECK_THAT(shown.out, Catch::Contains("lost: its owner") && Catch::Contains("expctl resume " + id));
  // Nobody wrote the ranks' ends either: they read as lost too, not as still running.
  const auto shown_json = d.expctl({"show", id, "--format", "json"});
  // The document in a variable: a range-for over .at() of a temporary reads freed memory (ASan).
  const json shown_document = json::parse(shown_json.out);
  for (const auto& rank : shown_document.at("ranks")) {
    CHECK(rank.at("status") == "lost");
  }
  const auto listed = d.expctl({"list", "--format", "json"});
  INFO(listed.out << listed.err);
  CHECK(listed.exit_code == 0);
  CHECK(listed.out.find("\"lost\"") != std::string::npos);

  // Nobody removed the ranks' rendezvous file either; the next run removes it.
  const auto left = rendezvous_files_of(killed_pid, tmp);
  CHECK(left.size() == 1);

  // --from-scratch: the supervisor may have died before the ranks' first checkpoint (step 50).
  Background resumed(with_tmp(d.argv({"resume", id, "--from-scratch"})), d.dir / "resumed");
  REQUIRE(eventually([&] { return resumed.err().find("resumed") != std::string::npos; }));
  REQUIRE(eventually([&] { return d.open().find_run(id).status == store::RunStatus::running; }));
  CHECK(rendezvous_files_of(killed_pid, tmp).empty());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(::kill(resumed.pid(), SIGINT) == 0);
  INFO(resumed.out() << resumed.err());
  CHECK(resumed.wait() == 130);
  CHECK(d.open().find_run(id).status == store::RunStatus::interrupted);
}

namespace {

/// Runs `spec args` to `steps` steps, interrupting it with SIGINT once it has written a few
/// checkpoints; returns the interrupted run.
store::RunRecord interrupted_run(const RunDir& d, const std::string& name, int steps) {
  Background expctl(d.argv({"run", tiny_spec(), "--set", "train.max_steps=" + std::to_string(steps), "--set",
                            "train.eval_every=0", "--set", "train.checkpoint_every=20", "--tag", name}),
                    d.dir / name);
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] {
    const auto runs = fs::exists(d.db) ? d.open().list_runs({.tag = name}) : std::vector<store::RunRecord>{};
    return !runs.empty() && (run = runs.front()).has_value();
  }));
  REQUIRE(eventually([&] {
    return d.open().metrics(run->id, {.name = "loss", .rank = 0}).size() >= 100;
  }));
  REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
  INFO(expctl.out() << expctl.err());
  REQUIRE(expctl.wait() == 130);
  return d.open().find_run(run->id);
}

/// The newest checkpoint file of `rank` in the run.
fs::path newest_checkpoint(const store::RunRecord& run, int rank) {
  fs::path newest;
  long long newest_step = -1;
  for (const auto& entry : fs::directory_iterator(run.run_dir / "checkpoints")) {
    long long step = 0;
    int parsed = -1;
    if (entry.path().extension() == ".pt" &&
        std::sscanf(entry.path().filename().c_str(), "rank%d-step%lld", &parsed, &step) == 2 && parsed == rank &&
        step > newest_step) {
      newest_step = step;
      newest = entry.path();
    }
  }
  REQUIRE_FALSE(newest.empty());
  return newest;
}

void flip_a_bit(const fs::path& file) {
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  stream.seekg(200);
  const char byte = static_cast<char>(stream.get());
  stream.seekp(200);
  stream.put(static_cast<char>(byte ^ 0x10));
}

}  // namespace

TEST_CASE("faults: resume verifies checkpoints across ranks and picks the newest step every rank holds intact") {
  RunDir d;
  constexpr int k_steps = 1500;
  const auto reference = d.expctl({"run", tiny_spec(), "--format", "json", "--set",
                                   "train.max_steps=" + std::to_string(k_steps), "--set", "train.eval_every=0",
                                   "--set", "train.checkpoint_every=20", "--tag", "reference"});
  REQUIRE(reference.exit_code == 0);
  const std::string expected = sha_of(json::parse(reference.out));

  // One flipped bit in rank 1's newest checkpoint: resumed from the step before, same curve.
  const auto flipped = interrupted_run(d, "flipped", k_steps);
  flip_a_bit(newest_checkpoint(flipped, 1));
  const auto resumed = d.expctl({"resume", flipped.id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(sha_of(json::parse(resumed.out)) == expected);

  // Ranks one checkpoint apart (killed between the ranks' writes): the common step, same curve.
  const auto uneven = interrupted_run(d, "uneven", k_steps);
  const auto newest = newest_checkpoint(uneven, 1);
  fs::remove(newest);
  fs::remove(fs::path(newest).replace_extension(".json"));
  const auto caught_up = d.expctl({"resume", uneven.id, "--format", "json"});
  INFO(caught_up.out << caught_up.err);
  REQUIRE(caught_up.exit_code == 0);
  CHECK(sha_of(json::parse(caught_up.out)) == expected);

  // Ended during the ranks' first checkpoint (rank 1's files have no index yet): no step every
  // rank holds, so resume refuses unless --from-scratch; then every rank starts again from step
  // 0, says so, and the curve is still the same.
  const auto first = interrupted_run(d, "first", k_steps);
  for (const auto& entry : fs::directory_iterator(first.run_dir / "checkpoints")) {
    if (entry.path().filename().string().starts_with("rank1-") && entry.path().extension() == ".json") {
      fs::remove(entry.path());
    }
  }
  const auto no_checkpoint = d.expctl({"resume", first.id});
  CHECK(no_checkpoint.exit_code == 2);
  CHECK_THAT(no_checkpoint.err, Catch::Contains("has no checkpoint") && Catch::Contains("--from-scratch"));
  const auto restarted = d.expctl({"resume", first.id, "--from-scratch", "--format", "json"});
  INFO(restarted.out << restarted.err);
  REQUIRE(restarted.exit_code == 0);
  CHECK_THAT(restarted.err, Catch::Contains("rank 1 holds no complete checkpoint") &&
                                Catch::Contains("starts again from step 0"));
  CHECK(sha_of(json::parse(restarted.out)) == expected);

  // Nothing usable on rank 1: refused, naming the file, the run untouched.
  const auto broken = interrupted_run(d, "broken", k_steps);
  for (const auto& entry : fs::directory_iterator(broken.run_dir / "checkpoints")) {
    if (entry.path().filename().string().starts_with("rank1-") && entry.path().extension() == ".pt") {
      std::ofstream(entry.path(), std::ios::binary | std::ios::trunc) << "4 KiB of garbage";
    }
  }
  const auto refused = d.expctl({"resume", broken.id});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("cannot be resumed") && Catch::Contains("rank1-step"));
  CHECK(d.open().find_run(broken.id).status == store::RunStatus::interrupted);
}

namespace {

/// Another process holding the database's write lock (BEGIN IMMEDIATE) for `seconds`.
class LockHolder {
 public:
  LockHolder(const fs::path& db, int seconds) {
    m_pid = ::fork();
    REQUIRE(m_pid >= 0);
    if (m_pid == 0) {
      sqlite3* handle = nullptr;
      // The recorder commits a batch a few times a second: wait for the one in flight, if any.
      if (sqlite3_open(db.c_str(), &handle) != SQLITE_OK || sqlite3_busy_timeout(handle, 10000) != SQLITE_OK ||
          sqlite3_exec(handle, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
        ::_exit(3);
      }
      ::sleep(static_cast<unsigned>(seconds));
      sqlite3_exec(handle, "COMMIT", nullptr, nullptr, nullptr);
      ::_exit(0);
    }
  }
  ~LockHolder() {
    if (!m_reaped) {
      ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }
  LockHolder(const LockHolder&) = delete;
  LockHolder& operator=(const LockHolder&) = delete;
  int wait() {
    int status = 0;
    ::waitpid(m_pid, &status, 0);
    m_reaped = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t m_pid = -1;
  bool m_reaped = false;
};

}  // namespace

TEST_CASE("faults: a store locked by another process for longer than the heartbeat timeout delays writes only") {
  RunDir d;
  Background expctl(d.argv(long_run()), d.dir / "locked");
  const auto run = start_training(d);
  {
    LockHolder lock(d.db, 25);  // the ranks' heartbeat timeout here is 20 s (timeout_s 60 / 3)
    CHECK(lock.wait() == 0);
  }
  REQUIRE(eventually([&] { return expctl.err().find("writable again") != std::string::npos; },
                     std::chrono::seconds(30)));
  CHECK(d.open().find_run(run.id).status == store::RunStatus::running);
  CHECK_THAT(expctl.err(), Catch::Contains("is locked by another process"));
  REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
  INFO(expctl.out() << expctl.err());
  CHECK(expctl.wait() == 130);
  const auto db = d.open();
  const auto finished = db.find_run(run.id);
  CHECK(finished.status == store::RunStatus::interrupted);
  const auto losses = db.metrics(run.id, {.name = "loss", .rank = 0});
  REQUIRE_FALSE(losses.empty());
  CHECK(losses.back().step == static_cast<std::int64_t>(losses.size()));  // no step lost
}

namespace {

/// A 16 MiB tmpfs of our own (room for the store's write-ahead log), unmounted on destruction.
struct SmallDisk {
  fs::path dir;
  std::string problem;
  explicit SmallDisk(const fs::path& where) : dir(where) {
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=16m") != 0) {
      problem = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (problem.empty()) {
      ::umount2(dir.c_str(), MNT_DETACH);
    }
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  /// Writes zeros until the disk is full.
  void fill() const {
    std::ofstream filler(dir / "filler", std::ios::binary);
    const std::string block(64 * 1024, '\0');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  void free() const { fs::remove(dir / "filler"); }
};

}  // namespace

TEST_CASE("faults: a disk that fills mid-run fails the run with the documented message and list still works") {
  test::TempDir dir;
  SmallDisk disk(dir / "disk");
  if (!disk.problem.empty()) {
    test::skip("mount", disk.problem);
    return;
  }
  RunDir d;
  d.db = disk.dir / "expctl.db";
  Background expctl(d.argv(long_run()), dir / "full");
  const auto run = start_training(d);
  disk.fill();
  INFO(expctl.out() << expctl.err());
  CHECK(expctl.wait(std::chrono::seconds(60)) == 1);
  CHECK_THAT(expctl.err(), Catch::Contains("no space left on device"));
  const auto listed = d.expctl({"list", "--format", "json"});
  INFO(listed.out << listed.err);
  CHECK(listed.exit_code == 0);
  const auto status = d.open().find_run(run.id).status;
  CHECK((status == store::RunStatus::failed || status == store::RunStatus::lost));

  const auto refused = d.expctl({"run", tiny_spec()});
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("no space left on device"));

  disk.free();
  // --from-scratch: the disk may have filled before the ranks' first checkpoint (step 50).
  Background resumed(d.argv({"resume", run.id, "--from-scratch"}), dir / "resumed");
  REQUIRE(eventually([&] { return resumed.err().find("resumed") != std::string::npos; }));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  REQUIRE(::kill(resumed.pid(), SIGINT) == 0);
  INFO(resumed.out() << resumed.err());
  CHECK(resumed.wait() == 130);
}

namespace {

/// Runs `sql` on the database at `db` (a trigger standing in for a store that fails one write).
void exec_sql(const fs::path& db, const std::string& sql) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  char* error = nullptr;
  const int code = sqlite3_exec(handle, sql.c_str(), nullptr, nullptr, &error);
  INFO((error != nullptr ? error : ""));
  sqlite3_free(error);
  sqlite3_close(handle);
  REQUIRE(code == SQLITE_OK);
}

}  // namespace

TEST_CASE("faults: a store that fails while the run concludes leaves it lost, never ended without its summary") {
  RunDir d;
  const auto reference = d.expctl({"run", tiny_spec(), "--format", "json", "--tag", "reference"});
  REQUIRE(reference.exit_code == 0);
  exec_sql(d.db, "CREATE TRIGGER no_summary BEFORE UPDATE OF summary ON runs "
                 "BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END;");
  const auto refused = d.expctl({"run", tiny_spec(), "--tag", "refused"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("cannot record how run") && Catch::Contains("it shows as lost"));
  const auto runs = d.open().list_runs({.tag = "refused"});
  REQUIRE(runs.size() == 1);
  CHECK(runs.front().status == store::RunStatus::lost);  // not `completed` with no summary

  exec_sql(d.db, "DROP TRIGGER no_summary;");
  const auto resumed = d.expctl({"resume", runs.front().id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(d.open().find_run(runs.front().id).status == store::RunStatus::completed);
  CHECK(sha_of(json::parse(resumed.out)) == sha_of(json::parse(reference.out)));
}

TEST_CASE("faults: a SIGSTOPped rank is named in the root cause whatever the collective timeout") {
  for (const char* timeout : {"10", "4"}) {
    INFO("distributed.timeout_s=" << timeout);
    RunDir d;
    Background expctl(d.argv(long_run({"--set", std::string("distributed.timeout_s=") + timeout})), d.dir / "stop");
    const auto run = start_training(d);
    const pid_t stopped = rank_pid(run, 1);
    REQUIRE(::kill(stopped, SIGSTOP) == 0);
    const int code = expctl.wait(std::chrono::seconds(60));
    ::kill(stopped, SIGCONT);  // a SIGKILL has reached it already; nothing is left stopped
    INFO(expctl.out() << expctl.err());
    CHECK(code == 1);
    const auto finished = d.open().find_run(run.id);
    CHECK(finished.status == store::RunStatus::failed);
    CHECK_THAT(finished.root_cause, Catch::StartsWith("rank 1 stopped answering"));
    // Where each rank was, from its last heartbeat: the stopped one mid-step, its peer blocked
    // on the gradient all-reduce waiting for it — or, stopped near step 20, on the one all-gather
    // of the ranks' pace (train.checkpoint_every_s), which is on no bucket.
    CHECK_THAT(finished.root_cause, Catch::Matches("rank 1 stopped answering[^\n]*; last heartbeats: rank 0 at step "
                                                   "[0-9]+ in comm_wait( on bucket 0)?, rank 1 at step [0-9]+ in "
                                                   "[a-z_]+[^\n]*(\n.*)*"));
    // Its native stack, taken before it was killed (install-deps.sh installs elfutils).
    REQUIRE_FALSE(expctl::run::stack_command(stopped).empty());
    const fs::path stack = run.run_dir / "logs" / "rank-1.stack.txt";
    CHECK_THAT(finished.root_cause, Catch::Contains("its native stack is in " + stack.string()));
    CHECK_THAT(read_text(stack), Catch::StartsWith("# ") && Catch::Contains("(rank 1, pid " + std::to_string(stopped)) &&
                                     Catch::Contains("#0 "));
    const auto artifacts = d.open().artifacts(run.id);
    CHECK(std::any_of(artifacts.begin(), artifacts.end(),
                      [](const store::ArtifactRecord& a) { return a.path == "logs/rank-1.stack.txt" && a.size_bytes > 0; }));
    CHECK(eventually([&] { return process_gone(stopped); }, std::chrono::seconds(10)));
  }
}

TEST_CASE("faults: a SIGKILLed rank fails the run and leaves no shared-memory segment in /dev/shm") {
  RunDir d;
  Background expctl(d.argv(long_run()), d.dir / "rank-killed");
  const auto run = start_training(d);
  const pid_t killed = rank_pid(run, 1);
  const pid_t peer = rank_pid(run, 0);
  REQUIRE(::kill(killed, SIGKILL) == 0);
  const int code = expctl.wait(std::chrono::seconds(60));
  INFO(expctl.out() << expctl.err());
  CHECK(code == 1);
  const auto finished = d.open().find_run(run.id);
  CHECK(finished.status == store::RunStatus::failed);
  CHECK_THAT(finished.root_cause, Catch::StartsWith("rank 1 was killed by SIGKILL"));
  const json summary = json::parse(finished.summary_json);
  CHECK(summary.at("allreduce") == "shm");
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    CHECK_FALSE((name.ends_with("-" + std::to_string(killed)) || name.ends_with("-" + std::to_string(peer))));
  }
}

TEST_CASE("faults: with a team server, a SIGKILLed rank fails the run and the server ends with exactly the node's "
          "points",
          "[postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  RunDir d;  // d.db: the node-local store the run writes and its shipper sends
  Background expctl(with({test::expctl_binary(), "--db", server.location, "--local-db", d.db.string(), "--runs-dir",
                          (d.dir / "results" / "runs").string()},
                         long_run()),
                    d.dir / "rank-killed");
  const auto run = start_training(d);
  // The kill lands while the run ships: the live shipper has sent points of it already (the
  // end-of-run pass alone would make the server equal too, so that is checked first).
  const std::string shipped = store::testing::postgres_points_sql("run_id = '" + run.id + "'");
  const auto some_shipped = [&] {
    try {
      return store::testing::query_postgres(server.location, shipped) != "0";
    } catch (const std::exception&) {
      return false;  // the shipper has not made the schema yet
    }
  };
  REQUIRE(eventually(some_shipped, std::chrono::seconds(30)));
  REQUIRE(::kill(rank_pid(run, 1), SIGKILL) == 0);
  const int code = expctl.wait(std::chrono::seconds(60));
  INFO(expctl.out() << expctl.err());
  CHECK(code == 1);
  auto local = d.open();
  auto team = server.open(store::OpenMode::read_only);
  CHECK(team.find_run(run.id).status == store::RunStatus::failed);
  CHECK_THAT(team.find_run(run.id).root_cause, Catch::StartsWith("rank 1 was killed by SIGKILL"));
  CHECK(store::ship_lag(local, team).runs_behind == 0);
  const auto want = local.metric_series(run.id);
  const auto have = team.metric_series(run.id);
  REQUIRE(have.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].name);
    CHECK(have[i].name == want[i].name);
    CHECK(have[i].points == want[i].points);
    CHECK(have[i].ranks == want[i].ranks);
    CHECK(have[i].last_step == want[i].last_step);
  }
  // Per run, rank and metric, and no point twice: no two chunks of a series overlap, and no open
  // point lies in a chunk's steps.
  const std::string in_run = "run_id = '" + run.id + "'";
  const std::string overlaps =
      "SELECT (SELECT count(*) FROM metric_chunks a JOIN metric_chunks b USING (run_id, key_id, rank) WHERE a." +
      in_run + " AND a.first_step < b.first_step AND a.last_step >= b.first_step) + (SELECT count(*) FROM " +
      "metric_points p JOIN metric_chunks c USING (run_id, key_id, rank) WHERE p." + in_run +
      " AND p.step BETWEEN c.first_step AND c.last_step)";
  const auto total = static_cast<std::int64_t>(local.metrics(run.id).size());
  CHECK(store::testing::query_postgres(server.location, store::testing::postgres_points_sql(in_run)) ==
        std::to_string(total));
  CHECK(store::testing::query_postgres(server.location, overlaps) == "0");
}

TEST_CASE("faults: a rendezvous that never completes names the address, the port and the missing node") {
  RunDir d;
  const std::string port = closed_port();
  const auto common = std::vector<std::string>{"--set", "distributed.nproc_per_node=1", "--set",
                                               "distributed.timeout_s=12", "--nnodes", "2", "--master-addr",
                                               "127.0.0.1", "--master-port", port};
  const auto lonely_node1 = d.expctl(with({"run", tiny_spec(), "--node-rank", "1"}, common));
  INFO(lonely_node1.out << lonely_node1.err);
  CHECK(lonely_node1.exit_code == 1);
  CHECK_THAT(lonely_node1.err, Catch::Contains("waiting for the rendezvous store at 127.0.0.1:" + port));
  CHECK_THAT(lonely_node1.out, Catch::Contains("cannot reach the rendezvous store at 127.0.0.1:" + port));
  CHECK_THAT(lonely_node1.out, !Catch::Contains("InitGoogleLogging"));

  const auto lonely_node0 = d.expctl(with({"run", tiny_spec(), "--node-rank", "0"}, common));
  INFO(lonely_node0.out << lonely_node0.err);
  CHECK(lonely_node0.exit_code == 1);
  CHECK_THAT(lonely_node0.err, Catch::Contains("waiting at 127.0.0.1:" + port + " for rank(s) 1 (node(s) 1)"));
  CHECK_THAT(lonely_node0.out, Catch::Contains("rank(s) 1 (node(s) 1) never joined"));
}

namespace {

/// `source` bind-mounted read-only at `target`, unmounted on destruction.
struct ReadOnlyView {
  fs::path target;
  std::string problem;
  ReadOnlyView(const fs::path& source, const fs::path& where) : target(where) {
    fs::create_directories(target);
    if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      problem = std::string("cannot bind-mount here: ") + std::strerror(errno);
      return;
    }
    if (::mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      problem = std::string("cannot remount read-only here: ") + std::strerror(errno);
    }
  }
  ~ReadOnlyView() { ::umount2(target.c_str(), MNT_DETACH); }
  ReadOnlyView(const ReadOnlyView&) = delete;
  ReadOnlyView& operator=(const ReadOnlyView&) = delete;
};

}  // namespace

TEST_CASE("faults: a store on a read-only mount is listed shown and compared") {
  RunDir d;
  for (const char* seed : {"seed=7", "seed=8"}) {
    const auto made = d.expctl({"run", tiny_spec(), "--set", "train.max_steps=20", "--set", seed});
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
  }
  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 2);
  ReadOnlyView view(d.db.parent_path(), d.dir / "ro");
  if (!view.problem.empty()) {
    test::skip("mount", view.problem);
    return;
  }
  const auto db = (view.target / "expctl.db").string();
  const auto listed = run_expctl({"--db", db, "list"});
  INFO(listed.out << listed.err);
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.out, Catch::Contains(runs[0].id) && Catch::Contains(runs[1].id));
  const auto shown = run_expctl({"--db", db, "show", runs[0].id, "--format", "json"});
  INFO(shown.out << shown.err);
  CHECK(shown.exit_code == 0);
  CHECK(json::parse(shown.out).at("run").at("id") == runs[0].id);
  // The same spec, seeds apart: the report is what matters here (its verdict is compare's subject).
  const auto compared = run_expctl({"--db", db, "compare", runs[1].id, runs[0].id, "--format", "json"});
  INFO(compared.out << compared.err);
  CHECK_THAT(compared.err, !Catch::Contains("cannot open") && !Catch::Contains("read-only"));
  CHECK(json::parse(compared.out).at("kind") == "compare");
}

// Issue 41, observation 4: after kill -9 before the first checkpoint, `resume` silently restarted
// from step 1 although `resume --help` says it is refused when no checkpoint exists.
TEST_CASE("faults: resume of a run with no checkpoint is refused, naming --from-scratch, and changes nothing") {
  RunDir d;
  const std::string id =
      kill_supervisor_while_training(d, d.argv(long_run({"--set", "train.checkpoint_every=0"}))).first;
  const auto refused = d.expctl({"resume", id});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err == "expctl: error: run " + id +
                           " cannot be resumed: it has no checkpoint (it was killed before its first; "
                           "train.checkpoint_every_s and train.checkpoint_every write them); `expctl resume " +
                           id + " --from-scratch` starts it again from step 0 under the same id\n");
  CHECK(run_json_of(d, id).at("status") == "lost");  // untouched
  const auto help = d.expctl({"resume", "--help"});
  CHECK_THAT(help.out, Catch::Contains("--from-scratch"));
}

// Issue 41, observation 4: Ctrl-C's output names the command that continues the run, and the
// resume banner names the step it continues from.
TEST_CASE("faults: Ctrl-C prints `expctl resume ID` and the resume banner names the checkpoint step") {
  RunDir d;
  std::string id;
  {
    Background expctl(d.argv(long_run()), d.dir / "interrupted");
    const auto run = start_training(d);
    id = run.id;
    REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
    CHECK(expctl.wait() == 130);
    INFO(expctl.out() << expctl.err());
    CHECK_THAT(expctl.out(), Catch::Contains("continue with     expctl resume " + id + "\n"));
  }
  Background resumed(d.argv({"resume", id}), d.dir / "resumed");
  REQUIRE(eventually([&] { return resumed.err().find("resumed from its checkpoint at step ") != std::string::npos; }));
  CHECK_THAT(resumed.err(), Catch::Contains("(continuing with step "));
  REQUIRE(::kill(resumed.pid(), SIGINT) == 0);
  CHECK(resumed.wait() == 130);
}

// Issue 41, item 3: with step-based checkpoints off, train.checkpoint_every_s alone writes one, so
// a kill -9 loses at most that many seconds and resume continues from it. No timing race: the
// supervisor is killed only once both ranks' indexes of one step are on disk.
TEST_CASE("faults: train.checkpoint_every_s alone writes a checkpoint that resume continues from after kill -9") {
  RunDir d;
  Background expctl(d.argv(long_run({"--set", "train.checkpoint_every=0", "--set", "train.checkpoint_every_s=1"})),
                    d.dir / "killed");
  const auto run = start_training(d);
  std::vector<std::int64_t> held;
  REQUIRE(eventually([&] { return !(held = steps_held_by_all(run.run_dir / "checkpoints", 2)).empty(); }));
  const pid_t rank0 = rank_pid(run, 0);
  const pid_t rank1 = rank_pid(run, 1);
  REQUIRE(::kill(expctl.pid(), SIGKILL) == 0);
  CHECK(expctl.wait() == 128 + SIGKILL);
  REQUIRE(eventually([&] { return process_gone(rank0) && process_gone(rank1); }, std::chrono::seconds(10)));
  CHECK(run_json_of(d, run.id).at("status") == "lost");
  INFO("held by both ranks when killed: " << held.front());
  CHECK(held.front() > 0);

  Background resumed(d.argv({"resume", run.id}), d.dir / "resumed");
  REQUIRE(eventually([&] { return resumed.err().find("(continuing with step ") != std::string::npos; }));
  const std::string banner = resumed.err();
  const auto at = banner.find("resumed from its checkpoint at step ");
  REQUIRE(at != std::string::npos);
  const auto step = std::stoll(banner.substr(at + std::string("resumed from its checkpoint at step ").size()));
  CHECK(step >= held.front());  // the ranks may have written a newer common step before they died
  REQUIRE(::kill(resumed.pid(), SIGINT) == 0);
  INFO(resumed.out() << resumed.err());
  CHECK(resumed.wait() == 130);
  CHECK_THAT(resumed.out(), Catch::Contains("continue with     expctl resume " + run.id + "\n"));
}
