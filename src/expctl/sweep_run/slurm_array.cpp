#include "expctl/sweep_run/slurm_array.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "expctl/store/types.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::sweep_run {

namespace fs = std::filesystem;
namespace slurm = launch::slurm;

std::optional<ArraySubmission> submit_array(const sweep::Sweep& sweep, const std::string& file,
                                            const Execution& execution, const StoreLocation& where,
                                            sweep::SbatchOptions options, const slurm::Client& client) {
  std::set<size_t> points;
  for (const sweep::Job& job : execution.plan.jobs) {
    points.insert(job.point);
  }
  if (points.empty()) {
    return std::nullopt;
  }
  options.points.assign(points.begin(), points.end());
  const std::string script = sbatch_script(sweep, file, where, options);
  ArraySubmission submission;
  submission.store_dir = task_store_dir(sweep, where);
  std::error_code error;
  fs::create_directories(submission.store_dir, error);
  EXPCTL_CHECK(!error, util::LaunchError, "cannot create {} for the array tasks' stores: {}",
               submission.store_dir.string(), error.message());
  submission.script = submission.store_dir / fmt::format("{}.sbatch", sweep.hash.substr(0, 12));
  const auto written = util::write_file_atomic(submission.script, script);
  EXPCTL_CHECK(written.has_value(), util::LaunchError, "cannot write {}: {}", submission.script.string(),
               written ? "" : written.error().message);
  // The script cds to the submit directory, where its relative paths (the sweep file, the
  // stores) were written from: this process's working directory.
  // Each task's output beside its store (the command line wins over the script's --output).
  submission.job = client.submit(
      submission.script,
      {"--chdir=" + fs::current_path().string(), "--output=" + (submission.store_dir / "slurm-%A_%a.out").string()});
  submission.points = options.points;
  sweep::write_array_record(submission.store_dir, {.job = submission.job,
                                                   .sweep_hash = sweep.hash,
                                                   .points = submission.points,
                                                   .submitted_at = store::format_utc(store::Clock::now())});
  return submission;
}

std::vector<ArrayTask> array_tasks(const slurm::Client& client, const std::string& job,
                                   const std::vector<size_t>& points) {
  std::map<size_t, ArrayTask> tasks;
  for (const size_t point : points) {
    tasks[point] =
        ArrayTask{.point = point, .state = slurm::JobState::pending, .exit_code = std::nullopt, .gone = false};
  }
  // Every task's record, queued, running or ended (kept MinJobAge seconds after it ends): one
  // `scontrol show job -o` line per task; a pending remainder is one line ("ArrayTaskId=4-7%2").
  // A task in no record at all has been purged (or never was): `unknown`, which the follower
  // counts as ended and the merge then finds (or not) in the task's store.
  std::set<size_t> seen;
  for (const slurm::JobInfo& info : client.show_all(job)) {
    const auto found = info.fields.find("ArrayTaskId");
    if (found == info.fields.end()) {
      continue;
    }
    for (const size_t point : slurm::parse_task_ids(found->second)) {
      if (const auto task = tasks.find(point); task != tasks.end()) {
        task->second.state = info.state;
        task->second.exit_code = info.exit_code;
        seen.insert(point);
      }
    }
  }
  for (auto& [point, task] : tasks) {
    if (!seen.contains(point)) {
      task.state = slurm::JobState::unknown;
      task.gone = true;
    }
  }
  std::vector<ArrayTask> list;
  for (auto& [point, task] : tasks) {
    list.push_back(task);
  }
  return list;
}

std::string array_line(const std::string& job, const std::vector<ArrayTask>& tasks) {
  std::map<std::string, size_t> counts;
  for (const ArrayTask& task : tasks) {
    std::string name(slurm::state_name(task.state));
    std::transform(name.begin(), name.end(), name.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
    ++counts[name];
  }
  std::string line = fmt::format("array {}:", job);
  bool first = true;
  for (const char* state : {"pending", "configuring", "running", "completing", "completed"}) {
    if (const auto found = counts.find(state); found != counts.end()) {
      line += fmt::format("{} {} {}", first ? "" : ",", found->second, state);
      first = false;
      counts.erase(found);
    }
  }
  for (const auto& [state, count] : counts) {
    line += fmt::format("{} {} {}", first ? "" : ",", count, state);
    first = false;
  }
  return line;
}

std::vector<ArrayTask> wait_for_array(const slurm::Client& client, const ArraySubmission& submission,
                                      std::chrono::milliseconds interval,
                                      const std::function<void(const std::string&)>& on_change,
                                      const std::function<bool()>& stop) {
  std::string last;
  while (true) {
    const auto tasks = array_tasks(client, submission.job, submission.points);
    const std::string line = array_line(submission.job, tasks);
    if (line != last) {
      on_change(line);
      last = line;
    }
    if (std::all_of(tasks.begin(), tasks.end(),
                    [](const ArrayTask& task) { return task.gone || slurm::is_final(task.state); })) {
      return tasks;
    }
    for (auto waited = std::chrono::milliseconds(0); waited < interval; waited += std::chrono::milliseconds(50)) {
      if (stop()) {
        return tasks;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::vector<sweep::ArrayPoint> array_points_now(const sweep::Sweep& sweep, const fs::path& dir,
                                                const slurm::Client& client) {
  auto points = sweep::array_points(sweep, dir);
  std::map<std::string, std::vector<size_t>> asked;  // job -> its points Slurm has a word on
  for (const sweep::ArrayPoint& point : points) {
    if (point.state == "queued" || point.state == "running") {
      asked[point.job].push_back(point.point);
    }
  }
  for (const auto& [job, indices] : asked) {
    std::vector<ArrayTask> tasks;
    try {
      tasks = array_tasks(client, job, indices);
    } catch (const util::Failure&) {
      continue;  // Slurm cannot be asked here: the stores' view stands
    }
    for (const ArrayTask& task : tasks) {
      const auto point =
          std::find_if(points.begin(), points.end(), [&](const sweep::ArrayPoint& p) { return p.point == task.point; });
      point->slurm_state = task.gone ? std::string("gone") : std::string(slurm::state_name(task.state));
      if (task.gone || slurm::is_final(task.state)) {
        point->state = point->state == "queued" ? "ended" : "lost";
      }
    }
  }
  return points;
}

std::optional<std::string> slurm_job_tag() {
  const char* array_job = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* array_task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (array_job != nullptr && array_task != nullptr && *array_job != '\0' && *array_task != '\0') {
    return util::tag::slurm_array_task(array_job, array_task);
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job != nullptr && *job != '\0') {
    return util::tag::slurm_job(job);
  }
  return std::nullopt;
}

}  // namespace expctl::sweep_run
