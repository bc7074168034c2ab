#include "expctl/sweep/plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "expctl/util/error.hpp"

namespace expctl::sweep {

namespace {

bool has_tag(const store::RunRecord& run, const std::string& tag) {
  return std::find(run.tags.begin(), run.tags.end(), tag) != run.tags.end();
}

bool resumable(store::RunStatus status) {
  return status == store::RunStatus::interrupted || status == store::RunStatus::lost ||
         status == store::RunStatus::failed;
}

std::vector<size_t> selected_points(const Sweep& sweep, const PlanOptions& options) {
  if (options.only_point) {
    EXPCTL_CHECK(*options.only_point < sweep.points.size(), util::UsageError,
                 "point {} is out of range: sweep {} has {} points (0..{})", *options.only_point, sweep.name,
                 sweep.points.size(), sweep.points.size() - 1);
    return {*options.only_point};
  }
  std::vector<size_t> points(sweep.points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    points[i] = i;
  }
  return points;
}

// The jobs one point still needs: resumes first, then new runs.
std::vector<Job> point_jobs(size_t point, size_t repeat, const PointState& state, bool force, Plan& plan) {
  const size_t taken = force ? 0 : state.completed + state.diverged + state.running;
  const size_t missing = taken >= repeat ? 0 : repeat - taken;
  const bool held = state.in_array && !force;  // the array's task makes them
  const size_t needed = held ? 0 : missing;
  plan.in_array += held ? missing : 0;
  plan.done_runs += repeat - needed;
  std::vector<Job> jobs;
  for (size_t i = 0; i < needed; ++i) {
    const bool resume = !force && i < state.resumable.size();
    jobs.push_back({point, resume ? state.resumable[i] : std::string()});
    plan.resumed += resume ? 1 : 0;
  }
  return jobs;
}

}  // namespace

std::string name_tag(const Sweep& sweep) {
  return "sweep:" + sweep.name;
}
std::string hash_tag(const Sweep& sweep) {
  return "sweep-hash:" + sweep.hash;
}
std::string point_tag(const Point& point) {
  return fmt::format("sweep-point:{}", point.index);
}

PointState point_state(std::span<const store::RunRecord> runs, const std::set<std::string>& environments,
                       const std::string& sweep_hash_tag) {
  std::vector<const store::RunRecord*> ordered;
  for (const store::RunRecord& run : runs) {
    if (run.environment_hash && environments.count(*run.environment_hash) > 0) {
      ordered.push_back(&run);
    }
  }
  // Newest first: ids sort by creation time.
  std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) { return a->id > b->id; });
  PointState state;
  for (const store::RunRecord* run : ordered) {
    const bool ours = has_tag(*run, sweep_hash_tag);
    state.completed += run->status == store::RunStatus::completed ? 1 : 0;
    state.diverged += ours && run->status == store::RunStatus::diverged ? 1 : 0;
    state.running += ours && run->status == store::RunStatus::running ? 1 : 0;
    if (ours && resumable(run->status)) {
      state.resumable.push_back(run->id);
    }
  }
  return state;
}

Plan plan_jobs(const Sweep& sweep, std::span<const PointState> states, const PlanOptions& options) {
  EXPCTL_ASSERT(options.force || states.size() == sweep.points.size(), "{} states for {} points", states.size(),
                sweep.points.size());
  Plan plan;
  plan.points = selected_points(sweep, options);
  const auto repeat = static_cast<size_t>(sweep.repeat);
  plan.total_runs = plan.points.size() * repeat;
  for (const size_t point : plan.points) {
    const PointState state = options.force ? PointState{} : states[point];
    for (Job& job : point_jobs(point, repeat, state, options.force, plan)) {
      plan.jobs.push_back(std::move(job));
    }
  }
  if (options.limit > 0 && plan.jobs.size() > options.limit) {
    plan.left_out = plan.jobs.size() - options.limit;
    plan.resumed -= static_cast<size_t>(std::count_if(plan.jobs.begin() + static_cast<std::ptrdiff_t>(options.limit),
                                                      plan.jobs.end(), [](const Job& job) { return !job.resume_run.empty(); }));
    plan.jobs.resize(options.limit);
  }
  return plan;
}

}  // namespace expctl::sweep
