// The runner, with a fake expctl (a shell script) as the points' program: slots and their CPU
// affinity, CUDA_VISIBLE_DEVICES, the run id from the JSON output, interrupts and stopping exits.

#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "support/test_support.hpp"
#include "sweep_test_helpers.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/launch/environment.hpp"
#include "expctl/sweep_run/runner.hpp"

using namespace expctl;
using test::TempDir;
using test::sweep_test::data;

namespace {

namespace fs = std::filesystem;

// Records its arguments, CPU affinity and CUDA_VISIBLE_DEVICES, then acts as FAKE_MODE says.
constexpr const char* k_fake_expctl = R"(#!/bin/sh
out="$FAKE_DIR/job-$$"
echo "$*" > "$out.args"
grep Cpus_allowed_list /proc/self/status | cut -f2 > "$out.cpus"
echo "${CUDA_VISIBLE_DEVICES:-unset}" > "$out.cuda"
echo "a line on stderr"  >&2
case "$FAKE_MODE" in
  interrupt)
    trap 'exit 130' INT
    case "$*" in *sweep-point:0\ *) kill -INT "$PPID" ;; esac
    sleep 5 & wait
    exit 0 ;;
  exit3) exit 3 ;;
  exit1) echo "expctl: error: the run failed" >&2; exit 1 ;;
  refuse-resume) case "$*" in *" resume "*) echo "expctl: error: run cannot be resumed" >&2; exit 2 ;; esac ;;
esac
sleep 0.2
echo '{"format_version":1,"kind":"run","run":{"id":"fake-'$$'"},"summary":{}}'
)";

std::string read(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::string content = text.str();
  while (!content.empty() && content.back() == '\n') {
    content.pop_back();
  }
  return content;
}

struct Fixture {
  TempDir dir;
  sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  sweep_run::RunnerOptions options;

  explicit Fixture(const std::string& mode, std::vector<sweep::Slot> slots) {
    const fs::path fake = dir.write("fake-expctl", k_fake_expctl);
    fs::permissions(fake, fs::perms::owner_all);
    fs::create_directories(dir / "jobs");
    options.executable = fake;
    options.global_args = {"--db", (dir / "expctl.db").string()};
    options.slots = std::move(slots);
    options.environment = launch::current_environment();
    options.environment["FAKE_DIR"] = (dir / "jobs").string();
    options.environment["FAKE_MODE"] = mode;
    options.log_dir = dir / "logs";
    options.redraw_every = std::chrono::milliseconds(50);
  }

  std::vector<sweep::Job> jobs(size_t count) const {
    std::vector<sweep::Job> out;
    for (size_t i = 0; i < count; ++i) {
      out.push_back({i, ""});
    }
    return out;
  }

  // The recorded file `suffix` of the job that ran point `point`.
  std::string recorded(size_t point, const std::string& suffix) const {
    for (const auto& entry : fs::directory_iterator(dir / "jobs")) {
      const std::string path = entry.path().string();
      if (path.ends_with(".args") &&
          read(entry.path()).find(fmt::format("sweep-point:{} ", point)) != std::string::npos) {
        return read(path.substr(0, path.size() - 5) + suffix);
      }
    }
    return "<no job for point " + std::to_string(point) + ">";
  }
};

}  // namespace

TEST_CASE("runner: each point runs with its slot's cores, and the run id comes from its JSON output") {
  const auto cpus = sweep::allowed_cpus();
  if (cpus.size() < 2) {
    expctl::test::skip("cores", "needs 2 cores, this process may use " + std::to_string(cpus.size()));
    return;
  }
  Fixture fixture("ok", {{0, {cpus[0]}, {}}, {1, {cpus[1]}, {}}});
  const auto jobs = fixture.jobs(4);
  const sweep_run::RunnerResult result = sweep_run::run_jobs(fixture.sweep, jobs, fixture.options);
  REQUIRE(result.outcomes.size() == 4);
  CHECK_FALSE(result.interrupted);
  CHECK(result.not_started == 0);
  for (const sweep_run::JobOutcome& outcome : result.outcomes) {
    INFO("point " << outcome.job.point << " in slot " << outcome.slot);
    CHECK(outcome.exit_code == 0);
    CHECK_THAT(outcome.run_id, Catch::StartsWith("fake-"));
    CHECK(fixture.recorded(outcome.job.point, ".cpus") == std::to_string(cpus[outcome.slot]));
    CHECK(fixture.recorded(outcome.job.point, ".cuda") == "unset");
    CHECK_THAT(read(outcome.log), Catch::StartsWith("=== ") && Catch::Contains("a line on stderr"));
  }
  CHECK(result.outcomes[0].job.point + result.outcomes[1].job.point <= 2);  // jobs start in order
}

TEST_CASE("runner: a GPU slot sets CUDA_VISIBLE_DEVICES for its points") {
  Fixture fixture("ok", {{0, {}, {"2", "3"}}});
  const auto jobs = fixture.jobs(1);
  const sweep_run::RunnerResult result = sweep_run::run_jobs(fixture.sweep, jobs, fixture.options);
  REQUIRE(result.outcomes.size() == 1);
  CHECK(fixture.recorded(0, ".cuda") == "2,3");
}

TEST_CASE("runner: an interrupt stops the sweep: the running point gets the signal and the rest never start") {
  Fixture fixture("interrupt", {{0, {}, {}}});
  const auto jobs = fixture.jobs(8);
  const sweep_run::RunnerResult result = sweep_run::run_jobs(fixture.sweep, jobs, fixture.options);
  CHECK(result.interrupted);
  REQUIRE(result.outcomes.size() == 1);
  CHECK(result.outcomes[0].exit_code == 130);
  CHECK(result.not_started == 7);
}

TEST_CASE("runner: a point that exits 3 stops the sweep, points that fail with 1 do not") {
  Fixture stops("exit3", {{0, {}, {}}});
  const auto jobs = stops.jobs(8);
  const sweep_run::RunnerResult stopped = sweep_run::run_jobs(stops.sweep, jobs, stops.options);
  CHECK(stopped.stopped_by_exit == 3);
  CHECK(stopped.outcomes.size() == 1);
  CHECK(stopped.not_started == 7);
  Fixture fails("exit1", {{0, {}, {}}});
  const sweep_run::RunnerResult failed = sweep_run::run_jobs(fails.sweep, fails.jobs(3), fails.options);
  CHECK(failed.stopped_by_exit == 0);
  REQUIRE(failed.outcomes.size() == 3);
  CHECK(failed.outcomes[2].exit_code == 1);
}

TEST_CASE("runner: a point whose resume is refused starts anew, and the sweep goes on") {
  Fixture fixture("refuse-resume", {{0, {}, {}}});
  const std::vector<sweep::Job> jobs{{0, "20260101-000000-aaaaaa"}, {1, ""}};
  const sweep_run::RunnerResult result = sweep_run::run_jobs(fixture.sweep, jobs, fixture.options);
  CHECK(result.stopped_by_exit == 0);
  CHECK(result.not_started == 0);
  REQUIRE(result.outcomes.size() == 3);
  CHECK(result.outcomes[0].exit_code == 2);
  CHECK(result.outcomes[0].job.resume_run == "20260101-000000-aaaaaa");
  CHECK(result.outcomes[1].job.point == 0);  // the point again, as a new run, before point 1
  CHECK(result.outcomes[1].job.resume_run.empty());
  CHECK(result.outcomes[1].exit_code == 0);
  CHECK(result.outcomes[2].job.point == 1);
}

TEST_CASE("runner: the progress sink gets events and one progress line") {
  Fixture fixture("ok", {{0, {}, {}}});
  std::vector<std::string> events;
  std::string progress;
  fixture.options.total_runs = 8;
  fixture.options.done_before = 6;
  fixture.options.progress = [&](const std::string& line, bool redraw) {
    (redraw ? progress : events.emplace_back()) = line;
  };
  sweep_run::run_jobs(fixture.sweep, fixture.jobs(2), fixture.options);
  REQUIRE(events.size() == 4);
  CHECK_THAT(events[0], Catch::StartsWith("point 0 (optim.lr=0.02 data.batch_size=16 seed=7): started in slot 0"));
  CHECK_THAT(events[1], Catch::StartsWith("point 0 completed in "));
  CHECK_THAT(progress, Catch::StartsWith("sweep grid: 8/8 runs done, 0 running, elapsed "));
}

TEST_CASE("runner: a point's command line") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  sweep_run::RunnerOptions options;
  options.executable = "/usr/bin/expctl";
  options.global_args = {"--db", "/r/expctl.db"};
  const auto argv = sweep_run::job_argv(sweep, {3, ""}, options);
  CHECK(argv == std::vector<std::string>{"/usr/bin/expctl",
                                         "--db",
                                         "/r/expctl.db",
                                         "run",
                                         data("base.yaml"),
                                         "--set",
                                         "train.max_steps=20",
                                         "--set",
                                         "optim.lr=0.02",
                                         "--set",
                                         "data.batch_size=32",
                                         "--set",
                                         "seed=8",
                                         "--tag",
                                         "sweep:grid",
                                         "--tag",
                                         "sweep-hash:" + sweep.hash,
                                         "--tag",
                                         "sweep-point:3",
                                         "--format",
                                         "json"});
  CHECK(sweep_run::job_argv(sweep, {3, "20260101-000000-abcdef"}, options) ==
        std::vector<std::string>{"/usr/bin/expctl", "--db", "/r/expctl.db", "resume", "20260101-000000-abcdef",
                                 "--format", "json"});
}

TEST_CASE("runner: progress line, ETA and durations") {
  CHECK(sweep_run::progress_line("s", {3, 8, 2, 1, 62, 100}) ==
        "sweep s: 3/8 runs done, 2 running, 1 failed, elapsed 1m02s, eta 1m40s");
  CHECK(sweep_run::progress_line("s", {0, 8, 1, 0, 5, -1}) == "sweep s: 0/8 runs done, 1 running, elapsed 5.0s, eta -");
  const std::vector<double> finished{10, 20};
  const std::vector<double> running{5, 30};
  // 4 queued at 15 s, plus 10 s left of one running (the other is past the mean), over 2 slots.
  CHECK(sweep_run::estimate_eta(finished, running, 4, 2) == Approx(35));
  CHECK(sweep_run::estimate_eta({}, running, 4, 2) < 0);
  CHECK(sweep_run::duration_text(0.85) == "850ms");
  CHECK(sweep_run::duration_text(42) == "42.0s");
  CHECK(sweep_run::duration_text(185) == "3m05s");
  CHECK(sweep_run::duration_text(7440) == "2h04m");
}
