#pragma once
/// What a sweep still has to run, decided from the store: content-addressed skip-if-done.
///
/// A point needs `repeat` runs. Done are its completed runs of the point's spec hash on an
/// environment of this machine (any run of that spec, whoever started it), and the diverged runs
/// of this sweep (a diverged run would diverge again: its result is that it diverges). A run of
/// this sweep that is still running elsewhere counts as taken. Of the runs still needed, the
/// sweep's own interrupted, lost and failed runs are resumed first (`expctl resume`: same run id,
/// from the newest intact checkpoint), newest first; the rest are new runs.

#include <cstddef>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "expctl/store/types.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::sweep {

/// The tags every run of a sweep carries: "sweep:<name>", "sweep-hash:<hash>" and "sweep-point:<index>".
std::string name_tag(const Sweep& sweep);
std::string hash_tag(const Sweep& sweep);
std::string point_tag(const Point& point);

/// What the store holds for one point.
struct PointState {
  size_t completed = 0;  ///< completed runs of its spec on an accepted environment
  size_t diverged = 0;   ///< diverged runs of this sweep on an accepted environment
  size_t running = 0;    ///< runs of this sweep still running (another `expctl sweep` or array task)
  bool in_array = false;  ///< a submitted Slurm array's task holds the point (array_progress.hpp)
  /// This sweep's interrupted, lost and failed runs on an accepted environment, newest first.
  std::vector<std::string> resumable;
};

/// The state of a point from the runs of its spec hash (`runs`, any order); `environments` are the
/// environment hashes that count as this machine (see accepted_environments in environment.hpp).
PointState point_state(std::span<const store::RunRecord> runs, const std::set<std::string>& environments,
                       const std::string& sweep_hash_tag);

/// One run to start.
struct Job {
  size_t point = 0;        ///< index into Sweep::points
  std::string resume_run;  ///< non-empty: `expctl resume` this run instead of starting a new one
};

struct PlanOptions {
  bool force = false;                  ///< start `repeat` new runs of every selected point, whatever the store holds
  size_t limit = 0;                    ///< start at most this many jobs (0: no limit)
  std::optional<size_t> only_point{};  ///< --point I / SLURM_ARRAY_TASK_ID
};

/// The jobs of one invocation.
struct Plan {
  std::vector<size_t> points;  ///< the selected points
  size_t total_runs = 0;       ///< points × repeat
  size_t done_runs = 0;        ///< already done (or taken) before this invocation
  size_t in_array = 0;         ///< of those, the runs a submitted Slurm array's tasks hold
  size_t resumed = 0;          ///< jobs that resume a run
  size_t left_out = 0;         ///< jobs that --limit left for a later invocation
  std::vector<Job> jobs;       ///< in point order
};

/// Plans the jobs; `states` has one entry per point of `sweep` (ignored with options.force).
/// Throws util::UsageError naming the valid range for an out-of-range only_point.
Plan plan_jobs(const Sweep& sweep, std::span<const PointState> states, const PlanOptions& options);

}  // namespace expctl::sweep
