// Skip-if-done: what a sweep still runs, from the runs the store holds.

#include <catch2/catch.hpp>

#include "expctl/sweep/plan.hpp"
#include "sweep_test_helpers.hpp"

using namespace expctl;
using store::RunStatus;
using test::sweep_test::data;

namespace {

const std::string k_here = "env-here";
const std::string k_tag = "sweep-hash:abc";

store::RunRecord run(const std::string& id, RunStatus status, const std::string& environment = k_here,
                     std::vector<std::string> tags = {k_tag}) {
  store::RunRecord record;
  record.id = id;
  record.status = status;
  record.environment_hash = environment;
  record.tags = std::move(tags);
  return record;
}

sweep::PointState state_of(const std::vector<store::RunRecord>& runs) {
  return sweep::point_state(runs, {k_here}, k_tag);
}

}  // namespace

TEST_CASE("plan: a completed run of the spec on this environment is done, whoever started it") {
  const auto state = state_of({run("1", RunStatus::completed, k_here, {}), run("2", RunStatus::completed, "elsewhere"),
                               run("3", RunStatus::failed, "elsewhere")});
  CHECK(state.completed == 1);
  CHECK(state.resumable.empty());
}

TEST_CASE("plan: the sweep's interrupted, lost and failed runs are resumable, newest first, and others' runs are not") {
  const auto state = state_of({run("20260101-000001-aaaaaa", RunStatus::interrupted),
                               run("20260101-000003-cccccc", RunStatus::lost),
                               run("20260101-000002-bbbbbb", RunStatus::failed),
                               run("20260101-000004-dddddd", RunStatus::interrupted, k_here, {"other"}),
                               run("20260101-000005-eeeeee", RunStatus::diverged), run("6", RunStatus::running)});
  CHECK(state.resumable ==
        std::vector<std::string>{"20260101-000003-cccccc", "20260101-000002-bbbbbb", "20260101-000001-aaaaaa"});
  CHECK(state.diverged == 1);
  CHECK(state.running == 1);
  CHECK(state.completed == 0);
}

TEST_CASE("plan: points that are done are skipped, resumes come first, and --limit leaves the rest for later") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  std::vector<sweep::PointState> states(8);
  states[0].completed = 1;
  states[2].completed = 1;
  states[3].resumable = {"run-3"};
  states[5].diverged = 1;
  const sweep::Plan plan = sweep::plan_jobs(sweep, states, {});
  CHECK(plan.total_runs == 8);
  CHECK(plan.done_runs == 3);
  REQUIRE(plan.jobs.size() == 5);
  CHECK(plan.jobs[0].point == 1);
  CHECK(plan.jobs[1].point == 3);
  CHECK(plan.jobs[1].resume_run == "run-3");
  CHECK(plan.resumed == 1);
  const sweep::Plan limited = sweep::plan_jobs(sweep, states, {.limit = 1});
  CHECK(limited.jobs.size() == 1);
  CHECK(limited.left_out == 4);
  CHECK(limited.resumed == 0);
}

TEST_CASE("plan: --force runs every selected point anew, and --point selects one") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  std::vector<sweep::PointState> states(8);
  for (auto& state : states) {
    state.completed = 1;
    state.resumable = {"old"};
  }
  CHECK(sweep::plan_jobs(sweep, states, {}).jobs.empty());
  const sweep::Plan forced = sweep::plan_jobs(sweep, states, {.force = true});
  REQUIRE(forced.jobs.size() == 8);
  CHECK(forced.jobs[7].resume_run.empty());
  const sweep::Plan one = sweep::plan_jobs(sweep, states, {.force = true, .only_point = 5});
  REQUIRE(one.jobs.size() == 1);
  CHECK(one.jobs[0].point == 5);
  CHECK(one.total_runs == 1);
  CHECK_THROWS_WITH(sweep::plan_jobs(sweep, states, {.only_point = 8}),
                    "point 8 is out of range: sweep grid has 8 points (0..7)");
}

TEST_CASE("plan: repeat asks for that many completed runs of each point") {
  const test::TempDir dir;
  const auto file = test::sweep_test::write_sweep(dir, "repeat: 3\n");
  const sweep::Sweep sweep = sweep::load_sweep(file);
  std::vector<sweep::PointState> states(1);
  states[0].completed = 1;
  states[0].resumable = {"r"};
  const sweep::Plan plan = sweep::plan_jobs(sweep, states, {});
  REQUIRE(plan.jobs.size() == 2);
  CHECK(plan.jobs[0].resume_run == "r");
  CHECK(plan.jobs[1].resume_run.empty());
  CHECK(plan.done_runs == 1);
}

TEST_CASE("plan: the tags of a sweep's runs") {
  const sweep::Sweep sweep = sweep::load_sweep(data("grid.yaml"));
  CHECK(sweep::name_tag(sweep) == "sweep:grid");
  CHECK(sweep::hash_tag(sweep) == "sweep-hash:" + sweep.hash);
  CHECK(sweep::point_tag(sweep.points[6]) == "sweep-point:6");
}
