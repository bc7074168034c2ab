#pragma once
/// `expctl sweep FILE --slurm [--wait]`: the points the store does not hold yet, submitted as one
/// Slurm job array (the --print-sbatch script, its --array limited to those points), and, with
/// --wait, followed task by task until every task has ended, then the tasks' stores merged into
/// the store. Slurm is driven through launch::slurm::Client (sbatch --parsable, squeue -r with a
/// format of ours, scontrol show job -o), never its human tables.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expctl/launch/slurm_job.hpp"
#include "expctl/sweep/sbatch.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/sweep_run/execute.hpp"

namespace expctl::sweep_run {

/// What was submitted.
struct ArraySubmission {
  std::string job;                  ///< the array's job id
  std::vector<size_t> points;       ///< the array task ids (= point indices)
  std::filesystem::path script;     ///< the batch script, kept beside the tasks' stores
  std::filesystem::path store_dir;  ///< where task-<I>.db and each task's slurm-<job>_<I>.out are written
};

/// Writes the job-array script of `execution`'s points still to run into the tasks' store folder
/// and submits it; nullopt when nothing is left to run. `extra` are sbatch's own options.
std::optional<ArraySubmission> submit_array(const sweep::Sweep& sweep, const std::string& file,
                                            const Execution& execution, const StoreLocation& where,
                                            sweep::SbatchOptions options, const launch::slurm::Client& client);

/// One array task as Slurm last reported it.
struct ArrayTask {
  size_t point = 0;
  launch::slurm::JobState state = launch::slurm::JobState::unknown;
  std::optional<int> exit_code{};
  bool gone = false;  ///< in no record of Slurm's: purged after MinJobAge (or never started)
};

/// The tasks of array job `job`: `squeue -h -r -j JOB -o %K|%T` while any is queued or running,
/// then `scontrol show job -o JOB` (one line per task) for the ended ones.
std::vector<ArrayTask> array_tasks(const launch::slurm::Client& client, const std::string& job,
                                   const std::vector<size_t>& points);

/// "array 123: 2 pending, 1 running, 5 completed"
std::string array_line(const std::string& job, const std::vector<ArrayTask>& tasks);

/// Follows the array until every task has ended (polling every `interval`, `on_change` called
/// with each new line), or until `stop()` says to stop following (the job runs on).
std::vector<ArrayTask> wait_for_array(const launch::slurm::Client& client, const ArraySubmission& submission,
                                      std::chrono::milliseconds interval,
                                      const std::function<void(const std::string&)>& on_change,
                                      const std::function<bool()>& stop);

/// sweep::array_points of `dir`, with Slurm's word on each point whose task has no run yet or a
/// running one (one `scontrol show job -o` per array): a task Slurm has ended becomes "ended" (no
/// run) or "lost" (its run still says running), and no longer holds its point. Where Slurm cannot
/// be asked (no scontrol, no slurmctld), the stores' view stands.
std::vector<sweep::ArrayPoint> array_points_now(const sweep::Sweep& sweep, const std::filesystem::path& dir,
                                                const launch::slurm::Client& client = launch::slurm::Client());

/// The tag a point's run gets inside a Slurm array task ("slurm-job:<array job>_<task>"), or
/// inside any other Slurm job ("slurm-job:<job>"); none outside Slurm.
std::optional<std::string> slurm_job_tag();

}  // namespace expctl::sweep_run
