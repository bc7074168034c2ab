// What a submitted Slurm array holds of a sweep, from its records and its tasks' stores (the
// scheduler's word is sweep_run's, tested against a real slurmctld in tests/cli/test_cli_slurm.cpp).

#include <fstream>

#include "sweep_test_helpers.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/store/store.hpp"
#include "expctl/sweep/array_progress.hpp"
#include "expctl/sweep/plan.hpp"
#include "expctl/sweep/report.hpp"

using namespace expctl;
using test::sweep_test::write_sweep;

namespace {

const std::string k_spec_hash(64, 'a');

// A task's store holding one run of point `point` in array `job`, with `steps` steps of loss.
std::string task_run(const std::filesystem::path& dir, size_t point, const std::string& job, store::RunStatus status,
                     int steps) {
  auto task = store::Store::open((dir / fmt::format("task-{}.db", point)).string());
  task.put_spec(k_spec_hash, "{}", "p");
  const auto run = task.create_run({k_spec_hash, std::nullopt, "p"});
  task.add_tag(run.id, fmt::format("slurm-job:{}_{}", job, point));
  std::vector<store::MetricPoint> points;
  for (int step = 1; step <= steps; ++step) {
    points.push_back({0, step, "loss", 1.0 / step});
  }
  task.append_metrics(run.id, points);
  if (status != store::RunStatus::running) {
    task.finish_run(run.id, status, status == store::RunStatus::completed ? 0 : 1, "");
  }
  return run.id;
}

}  // namespace

TEST_CASE("array progress: each point of an unmerged array reads queued, or its task's newest run and step") {
  test::TempDir dir;
  const auto sweep = sweep::load_sweep(write_sweep(dir, "name: four\ngrid:\n  optim.lr: [0.1, 0.2, 0.3, 0.4]\n"));
  const auto folder = sweep::array_dir(sweep, dir / "expctl.db");
  CHECK(folder == dir / "sweep-four");
  std::filesystem::create_directories(folder);
  CHECK(sweep::array_points(sweep, folder).empty());  // nothing submitted

  sweep::write_array_record(folder, {"57", sweep.hash, {0, 1, 2}, "2026-12-06T10:00:00.000Z", false});
  // Another sweep's record in the same folder says nothing about this one.
  sweep::write_array_record(folder, {"58", std::string(64, 'f'), {3}, "2026-12-06T10:00:01.000Z", false});
  const std::string running = task_run(folder, 0, "57", store::RunStatus::running, 150);
  task_run(folder, 1, "57", store::RunStatus::completed, 20);
  // A run of an older array in the same task store is not this array's.
  task_run(folder, 2, "41", store::RunStatus::failed, 5);

  const auto points = sweep::array_points(sweep, folder);
  REQUIRE(points.size() == 3);
  CHECK(points[0].state == "running");
  CHECK(points[0].run == running);
  CHECK(points[0].step == 150);
  CHECK(points[1].state == "completed");
  CHECK(points[1].completed == 1);
  CHECK(points[2].state == "queued");
  CHECK_FALSE(points[2].run);
  for (const auto& point : points) {
    CHECK(point.job == "57");
    CHECK(sweep::held_by_array(point));
  }
  CHECK(sweep::array_lines(points) ==
        std::vector<std::string>{
            "array 57: completed, not merged yet, point 1; queued point 2; running point 0 (step 150)"});

  // The plan takes held points as done; the report names them instead of "no completed run yet".
  std::vector<sweep::PointState> states(sweep.points.size());
  for (const auto& point : points) {
    states[point.point].in_array = sweep::held_by_array(point);
  }
  const auto plan = sweep::plan_jobs(sweep, states, {});
  REQUIRE(plan.jobs.size() == 1);
  CHECK(plan.jobs[0].point == 3);
  CHECK(plan.in_array == 3);
  CHECK(plan.done_runs == 3);
  CHECK(sweep::plan_jobs(sweep, states, {.force = true}).jobs.size() == 4);
  sweep::Report report = sweep::build_report(sweep, std::vector<std::vector<store::RunRecord>>(4), {});
  report.array = points;
  const std::string text = sweep::render_text(report);
  CHECK_THAT(text, Catch::Contains("array 57: completed, not merged yet, point 1"));
  CHECK_THAT(text, Catch::Contains("no completed run yet: point(s) 3 ("));
  CHECK(sweep::to_json(report)["array"][0]["step"] == 150);

  // A later submission of a point wins; a merged array holds nothing.
  sweep::write_array_record(folder, {"60", sweep.hash, {2}, "2026-12-06T11:00:00.000Z", false});
  task_run(folder, 2, "60", store::RunStatus::failed, 3);
  const auto later = sweep::array_points(sweep, folder);
  REQUIRE(later.size() == 3);
  CHECK(later[2].job == "60");
  CHECK(later[2].state == "failed");
  CHECK_FALSE(sweep::held_by_array(later[2]));  // the next sweep submits it again
  sweep::mark_array_merged(folder, "57");
  const auto after_merge = sweep::array_points(sweep, folder);
  REQUIRE(after_merge.size() == 1);
  CHECK(after_merge[0].point == 2);

  // A damaged record names no point.
  std::ofstream(folder / "array-61.json") << "{\"job\": ";
  CHECK(sweep::array_points(sweep, folder).size() == 1);
}
