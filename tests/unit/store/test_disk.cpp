// The store on real file systems that refuse writes: a full tmpfs, a read-only bind mount, and a
// folder the user cannot write.
#include <cerrno>
#include <cstdio>
#include <string>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount_fixture.hpp"
#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"

using namespace expctl;
using store::OpenMode;
using store::RunStatus;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_no_space = ": no space left on device (free some disk space and retry); the store is unchanged";
constexpr const char* k_read_only =
    ": the database is read-only (check the permissions of the file and its folder, and that its disk is not "
    "mounted read-only)";

/// The runs a fresh store gets in these tests.
struct Recorded {
  std::string completed;
  std::string running;
};

/// Creates a store at `db_path` with one completed run (3 metric points, a tag, a rank) and one
/// running run, and closes it (which checkpoints the WAL and removes -wal and -shm).
Recorded record_runs(const fs::path& db_path) {
  auto db = store::Store::open(db_path);
  const std::string hash = test::fake_spec_hash("disk");
  db.put_spec(hash, test::k_canonical_spec, "quickstart");
  Recorded runs;
  runs.completed = db.create_run({hash, std::nullopt, "done", std::nullopt}).id;
  db.append_metrics(runs.completed,
                    std::vector<store::MetricPoint>{{0, 1, "loss", 3.0}, {0, 2, "loss", 2.0}, {0, 3, "loss", 1.0}});
  db.add_rank(runs.completed, store::RankRecord{0, "node1", 1, std::nullopt, RunStatus::completed, 0, {}});
  db.add_tag(runs.completed, "baseline");
  db.finish_run(runs.completed, RunStatus::completed, 0, "");
  runs.running = db.create_run({hash, std::nullopt, "going", std::nullopt}).id;
  return runs;
}

/// What `list`, `show` and `compare` read, checked against record_runs.
void check_reads(const store::Store& db, const Recorded& runs) {
  const auto listed = db.list_runs();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].id == runs.running);
  CHECK(listed[0].status == RunStatus::running);  // owned by this live process
  CHECK(db.find_run(runs.completed).status == RunStatus::completed);
  CHECK(db.run(runs.completed)->tags == std::vector<std::string>{"baseline"});
  CHECK(db.metrics(runs.completed).size() == 3);
  CHECK(db.metric_series(runs.completed).at(0).last_value == 1.0);
  CHECK(db.ranks(runs.completed).size() == 1);
  CHECK(db.spec(listed[0].spec_hash).has_value());
  CHECK(db.list_runs({RunStatus::completed, std::string("baseline"), "", 0}).size() == 1);
}

/// Calls `write` and checks that it fails with exactly `display + suffix`, exit code 1.
template <typename Fn>
void check_write_refused(Fn&& write, const std::string& display, const char* suffix) {
  try {
    write();
    FAIL("the write did not fail");
  } catch (const util::StoreError& error) {
    CHECK(std::string(error.what()) == display + suffix);
    CHECK(error.exit_code() == util::ExitCode::run_failed);
  }
}

std::unique_ptr<test::Mount> small_tmpfs() {
  auto disk = test::Mount::tmpfs("3m");
  if (disk->error() != 0) {
    test::skip("mount", test::mount_skip_reason("mount a tmpfs", disk->error()));
    return nullptr;
  }
  return disk;
}

/// A read-only view of `disk`, or nullptr (with the skip message) when bind mounts are refused.
std::unique_ptr<test::Mount> read_only_view(const test::Mount& disk) {
  auto view = test::Mount::read_only_view(disk.path());
  if (view->error() != 0) {
    test::skip("mount", test::mount_skip_reason("bind-mount read-only", view->error()));
    return nullptr;
  }
  return view;
}

std::vector<store::MetricPoint> batch_of(int first_step, int count) {
  std::vector<store::MetricPoint> points;
  for (int step = first_step; step < first_step + count; ++step) {
    points.push_back({0, step, "train_loss_with_a_long_name", 1.0 / (step + 1)});
  }
  return points;
}

}  // namespace

TEST_CASE("disk: on a disk full before anything is written, stores are read in both modes and writes say no space") {
  const auto disk = small_tmpfs();
  if (!disk) {
    return;
  }
  const fs::path db_path = *disk / "results" / "expctl.db";
  const Recorded runs = record_runs(db_path);
  REQUIRE_FALSE(fs::exists(db_path.string() + "-shm"));  // a reader will have to make one
  REQUIRE(test::fill_disk(disk->path()));

  check_reads(store::Store::open(db_path, OpenMode::read_only), runs);
  auto db = store::Store::open(db_path);
  check_reads(db, runs);
  check_write_refused([&] { db.add_tag(runs.completed, "x"); }, db_path.string(), k_no_space);
  const std::string spec_hash = db.list_runs()[0].spec_hash;
  check_write_refused(
      [&] {
        db.create_run({spec_hash, std::nullopt, "x", std::nullopt});
      },
      db_path.string(), k_no_space);
  check_write_refused([&] { db.finish_run(runs.running, RunStatus::failed, 1, ""); }, db_path.string(), k_no_space);

  const fs::path new_path = *disk / "new.db";
  check_write_refused([&] { store::Store::open(new_path); }, new_path.string(), k_no_space);

  fs::remove(*disk / "filler");  // space again: the same store takes writes, nothing was lost
  auto writer = store::Store::open(db_path);
  writer.finish_run(runs.running, RunStatus::failed, 1, "disk full");
  CHECK(store::Store::open(db_path, OpenMode::read_only).run(runs.running)->status == RunStatus::failed);
}

TEST_CASE("disk: a write that fills the disk fails in one line, leaves nothing, and finish_run still succeeds") {
  const auto disk = small_tmpfs();
  if (!disk) {
    return;
  }
  const fs::path db_path = *disk / "expctl.db";
  auto db = store::Store::open(db_path);
  db.put_spec(test::fake_spec_hash("fill"), "{}", "fill");
  const auto run = db.create_run({test::fake_spec_hash("fill"), std::nullopt, "filling", std::nullopt});
  REQUIRE(test::fill_disk(disk->path(), 256 * 1024));

  constexpr int k_batch = 1000;
  int committed = 0;
  bool failed = false;
  for (int attempt = 0; attempt < 200 && !failed; ++attempt) {
    try {
      db.append_metrics(run.id, batch_of(committed, k_batch));
      committed += k_batch;
    } catch (const util::StoreError& error) {
      CHECK(std::string(error.what()) == db_path.string() + k_no_space);
      CHECK(error.exit_code() == util::ExitCode::run_failed);
      failed = true;
    }
  }
  REQUIRE(failed);
  CHECK(committed > 0);
  CHECK(db.metrics(run.id).size() == static_cast<size_t>(committed));  // nothing of the failed batch
  // While the disk is full, other processes' reads work too (the -shm exists now).
  CHECK(store::Store::open(db_path, OpenMode::read_only).metrics(run.id).size() == static_cast<size_t>(committed));
  CHECK(store::Store::open(db_path).run(run.id)->status == RunStatus::running);

  // The rolled-back batch left room in the WAL file, which a small update reuses.
  db.finish_run(run.id, RunStatus::failed, 1, "no space left on device");
  const auto finished = store::Store::open(db_path, OpenMode::read_only).run(run.id).value();
  CHECK(finished.status == RunStatus::failed);
  CHECK(finished.root_cause == "no space left on device");
}

TEST_CASE("read-only storage: a store on a read-only mount is read in both modes, and writes say read-only") {
  const auto disk = small_tmpfs();
  if (!disk) {
    return;
  }
  const Recorded runs = record_runs(*disk / "results" / "expctl.db");
  const auto view = read_only_view(*disk);
  if (!view) {
    return;
  }
  const fs::path db_path = *view / "results" / "expctl.db";
  check_reads(store::Store::open(db_path, OpenMode::read_only), runs);
  auto db = store::Store::open(db_path);
  check_reads(db, runs);
  check_write_refused([&] { db.add_tag(runs.completed, "x"); }, db_path.string(), k_read_only);
  CHECK_FALSE(fs::exists(db_path.string() + "-wal"));
  CHECK_FALSE(fs::exists(db_path.string() + "-shm"));
}

TEST_CASE("read-only storage: an older schema there is refused in one line, and upgraded once writable") {
  const auto disk = small_tmpfs();
  if (!disk) {
    return;
  }
  { store::testing::open_at_schema_version(*disk / "old.db", 2); }
  const auto view = read_only_view(*disk);
  if (!view) {
    return;
  }
  const fs::path db_path = *view / "old.db";
  const std::string expected = db_path.string() + ": written by an older expctl (schema v2, this one needs v" +
                               std::to_string(store::latest_schema_version()) +
                               ") and is on read-only storage: open it once where it is writable to upgrade it";
  for (const auto mode : {OpenMode::read_only, OpenMode::read_write}) {
    try {
      store::Store::open(db_path, mode);
      FAIL("an older schema on read-only storage was opened");
    } catch (const util::StoreError& error) {
      CHECK(std::string(error.what()) == expected);
      CHECK(error.exit_code() == util::ExitCode::run_failed);
    }
  }
  CHECK(store::Store::open(*disk / "old.db", OpenMode::read_only).schema_version() == store::latest_schema_version());
  CHECK(store::Store::open(db_path, OpenMode::read_only).list_runs().empty());
}

namespace {

enum ChildExit : int { ok = 0, wrong = 1, cannot_drop_privileges = 10 };

/// In a child: drops to user and group "nobody" (65534) and runs the read checks of the
/// unwritable-folder test; the exit status says how it went.
[[noreturn]] void read_as_nobody(const fs::path& db_path, const fs::path& old_path, const std::string& completed) {
  if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
    ::_exit(ChildExit::cannot_drop_privileges);
  }
  int status = ChildExit::wrong;
  try {
    const auto reader = store::Store::open(db_path, OpenMode::read_only);
    auto writer = store::Store::open(db_path);
    const bool read = reader.run(completed).has_value() && writer.metrics(completed).size() == 3;
    std::string refused;
    try {
      writer.add_tag(completed, "x");
    } catch (const util::StoreError& error) {
      refused = error.what();
    }
    std::string older;
    try {
      store::Store::open(old_path, OpenMode::read_only);
    } catch (const util::StoreError& error) {
      older = error.what();
    }
    std::fprintf(stderr, "nobody: refused write: %s\nnobody: older schema: %s\n", refused.c_str(), older.c_str());
    const bool says_why =
        refused == db_path.string() + k_read_only && older.find("is on read-only storage") != older.npos;
    status = read && says_why ? ChildExit::ok : ChildExit::wrong;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "nobody: %s\n", error.what());
  }
  std::fflush(stderr);
  ::_exit(status);
}

}  // namespace

TEST_CASE("read-only storage: a store in a folder this user cannot write is still read") {
  if (::geteuid() != 0) {
    test::skip("root", "needs root, to read the store as user nobody (root ignores permission bits)");
    return;
  }
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms(0755));  // nobody must reach the folder
  const fs::path folder = dir / "results";
  const Recorded runs = record_runs(folder / "expctl.db");
  { store::testing::open_at_schema_version(folder / "old.db", 2); }
  REQUIRE(::chmod(folder.c_str(), 0555) == 0);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    read_as_nobody(folder / "expctl.db", folder / "old.db", runs.completed);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  ::chmod(folder.c_str(), 0755);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == ChildExit::cannot_drop_privileges) {
    test::skip("root", "cannot switch to user nobody here");
    return;
  }
  CHECK(WEXITSTATUS(status) == ChildExit::ok);
  CHECK_FALSE(fs::exists(folder / "expctl.db-shm"));
}
