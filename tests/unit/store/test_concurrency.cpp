// Several processes writing one database at once: nothing lost, never "database is locked".
#include <cstdio>
#include <iostream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

constexpr int k_writers = 4;
constexpr int k_runs_per_writer = 5;
constexpr int k_points_per_run = 2000;
constexpr int k_points_per_batch = 100;  // the runner's batches are about this size
/// A child that is still running after this long is stuck: SIGALRM ends it, and the test fails.
constexpr unsigned k_child_alarm_s = 240;

/// Exit statuses a writer child reports to the parent.
enum ChildExit : int { ok = 0, locked = 3, other_error = 4, unknown_error = 5 };

/// The body of one writer process. Opens its own connection (none is inherited across fork).
int write_runs(const fs::path& db_path, const std::string& spec_hash, int writer) {
  auto db = store::Store::open(db_path);
  db.put_spec(spec_hash, test::k_canonical_spec, "shared");
  for (int r = 0; r < k_runs_per_writer; ++r) {
    const auto run = db.create_run({spec_hash, std::nullopt, "writer-" + std::to_string(writer), std::nullopt});
    db.add_tag(run.id, "writer:" + std::to_string(writer));
    std::vector<store::MetricPoint> batch;
    for (int step = 0; step < k_points_per_run; ++step) {
      batch.push_back({0, step, "loss", 1.0 / (step + 1)});
      if (batch.size() == k_points_per_batch) {
        db.append_metrics(run.id, batch);
        batch.clear();
      }
    }
    db.finish_run(run.id, store::RunStatus::completed, 0, "");
  }
  return ChildExit::ok;
}

[[noreturn]] void child_main(const fs::path& db_path, const std::string& spec_hash, int writer) {
  ::alarm(k_child_alarm_s);
  int status = ChildExit::unknown_error;
  try {
    status = write_runs(db_path, spec_hash, writer);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    std::fprintf(stderr, "writer %d: %s\n", writer, message.c_str());
    status = message.find("locked") != std::string::npos ? ChildExit::locked : ChildExit::other_error;
  } catch (...) {
    status = ChildExit::unknown_error;
  }
  std::fflush(stderr);
  ::_exit(status);  // no atexit handlers: the parent's Catch2 state is not ours to finish
}

}  // namespace

TEST_CASE("concurrency: processes writing one new database at once lose nothing and never see it locked") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string spec_hash = test::fake_spec_hash("concurrent");

  std::vector<pid_t> children;
  for (int writer = 0; writer < k_writers; ++writer) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      child_main(db_path, spec_hash, writer);
    }
    children.push_back(pid);
  }
  std::vector<int> statuses;
  for (const pid_t pid : children) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    statuses.push_back(status);
  }
  for (const int status : statuses) {
    INFO("exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ", signal "
                        << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == ChildExit::ok);
  }

  auto db = store::Store::open(db_path, store::OpenMode::read_only);
  const auto runs = db.list_runs();
  CHECK(runs.size() == static_cast<size_t>(k_writers * k_runs_per_writer));
  for (int writer = 0; writer < k_writers; ++writer) {
    CHECK(db.list_runs({{}, "writer:" + std::to_string(writer), "", 0}).size() == k_runs_per_writer);
  }
  for (const auto& run : runs) {
    CHECK(run.status == store::RunStatus::completed);
    CHECK(db.metrics(run.id).size() == static_cast<size_t>(k_points_per_run));
    CHECK(fs::exists(run.run_dir / "spec.json"));
  }
}
