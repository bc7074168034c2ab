#pragma once
/// The Slurm job-array script of a sweep: one array task per point (`--array=0-N%K`), each
/// running `expctl sweep FILE` with its own store; SLURM_ARRAY_TASK_ID selects the point. Points
/// of several nodes run their ranks through srun (the Slurm launcher path of `expctl run`).

#include <cstddef>
#include <string>
#include <vector>

#include "expctl/sweep/sweep.hpp"

namespace expctl::sweep {

struct SbatchOptions {
  std::string sweep_file;               ///< as given: relative paths are relative to the submit directory
  std::string executable;               ///< the expctl the tasks run (overridable with $EXPCTL)
  std::string store_dir;                ///< where task-<I>.db are written, e.g. "results/sweep-<name>"
  std::string merged_db;                ///< the store the merge hint names, e.g. "results/expctl.db"
  size_t max_concurrent = 0;            ///< the %K of --array; 0: every point at once
  std::vector<std::string> directives;  ///< more #SBATCH options ("--partition=gpu"), after the defaults
  std::vector<size_t> points{};         ///< the array's task ids (point indices); empty: every point
};

/// Slurm's --array list of `points` (sorted, runs of consecutive ids as ranges): "0-3,5,7-8".
std::string array_list(std::vector<size_t> points);

/// The script, ending with a newline.
std::string render_sbatch(const Sweep& sweep, const SbatchOptions& options);

}  // namespace expctl::sweep
