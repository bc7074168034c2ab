// The run library reports to the observer in its request and writes nothing to the terminal
// itself: a whole run in this process (a small program's ranks, real processes) with a collecting
// observer leaves this process's stdout and stderr empty, and the observer holds what the
// terminal printer would have shown, and the result.
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/collecting_observer.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/store/store.hpp"

using namespace expctl;

namespace {

/// What `body` wrote to this process's stdout and stderr (file descriptors 1 and 2).
struct Captured {
  std::string out;
  std::string err;
};

std::string read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Captured capture_terminal(const test::TempDir& dir, const std::function<void()>& body) {
  const auto out_file = dir.path() / "stdout.txt";
  const auto err_file = dir.path() / "stderr.txt";
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = ::dup(STDOUT_FILENO);
  const int saved_err = ::dup(STDERR_FILENO);
  const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE((saved_out >= 0 && saved_err >= 0 && out >= 0 && err >= 0));
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  const auto restore = [&] {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out, STDOUT_FILENO);
    ::dup2(saved_err, STDERR_FILENO);
    for (const int fd : {out, err, saved_out, saved_err}) {
      ::close(fd);
    }
  };
  try {
    body();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return {read_all(out_file), read_all(err_file)};
}

/// A program spec of one rank around `script`, and a store for its runs.
struct ProgramRun {
  test::TempDir dir;
  std::filesystem::path db = dir.path() / "results" / "expctl.db";
  std::filesystem::path spec;
  explicit ProgramRun(const std::string& script) {
    const auto program = dir.write("prog.sh", "#!/bin/sh\n" + script);
    ::chmod(program.c_str(), 0755);
    spec = dir.write("prog.yaml", "distributed:\n  nproc_per_node: 1\nprogram:\n  command: [./prog.sh]\n");
  }
  run::RunRequest request(run::RunObserver& observer) const {
    run::RunRequest request;
    request.spec_file = spec;
    request.open_store = [db = db] { return store::Store::open(db); };
    request.observer = &observer;
    return request;
  }
};

}  // namespace

TEST_CASE(
    "observer: a run with a collecting observer prints nothing and the observer gets its lines, notes and "
    "result") {
  const ProgramRun p(
      "echo hello from the program\n"
      "echo '{\"step\": 1, \"loss\": 0.5}' >&\"$EXPCTL_METRICS_FD\"\n"
      "echo 'not the protocol' >&\"$EXPCTL_METRICS_FD\"\n");
  run::CollectingObserver observer;
  run::RunResult result;
  const Captured terminal = capture_terminal(p.dir, [&] { result = run::run_spec(p.request(observer)); });
  CHECK(terminal.out.empty());
  CHECK(terminal.err.empty());
  INFO(terminal.err);
  REQUIRE(result.exit_code == util::ExitCode::ok);
  REQUIRE(result.run);
  CHECK(result.run->status == store::RunStatus::completed);

  const auto results = observer.results();
  REQUIRE(results.size() == 1);
  CHECK(results[0].exit_code == util::ExitCode::ok);
  REQUIRE(results[0].run);
  CHECK(results[0].run->id == result.run->id);
  CHECK(results[0].summary.at("program").at("steps_logged") == 1);

  const auto started = observer.started();
  REQUIRE(started.size() == 1);
  CHECK(started[0].run_id == result.run->id);
  CHECK(started[0].how == "started");
  CHECK(started[0].ranks == 1);
  CHECK(started[0].world_size == 1);

  const auto lines = observer.lines();
  CHECK(std::find(lines.begin(), lines.end(), "[rank 0] hello from the program") != lines.end());
  const auto notes = observer.notes();
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::StartsWith("warning: rank 0 wrote a line that is not the metrics protocol"));
  CHECK(observer.errors().empty());
}

TEST_CASE("observer: a run without an observer is silent too, and its result is still returned") {
  const ProgramRun p("echo '{\"step\": 1, \"loss\": 0.5}' >&\"$EXPCTL_METRICS_FD\"\necho to the log\n");
  run::CollectingObserver unused;
  auto request = p.request(unused);
  request.observer = nullptr;
  run::RunResult result;
  const Captured terminal = capture_terminal(p.dir, [&] { result = run::run_spec(request); });
  CHECK(terminal.out.empty());
  CHECK(terminal.err.empty());
  CHECK(result.exit_code == util::ExitCode::ok);
  CHECK(unused.results().empty());
  // What the program wrote is still in its log: only the terminal is the observer's.
  REQUIRE(result.run);
  CHECK_THAT(read_all(result.run->run_dir / "logs" / "rank-0.log"), Catch::Contains("to the log"));
}
