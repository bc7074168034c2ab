#pragma once
/// What a submitted Slurm array holds of a sweep (`expctl sweep FILE --slurm`), for the planning
/// of the next `sweep`, `--dry-run`, `--report` and the dashboard's sweep page. Two sources, both
/// files beside the store: the array's record (`array-<job>.json`, written at submission, marked
/// merged once --wait brought the tasks' runs in) and each task's own store (`task-<I>.db`, read
/// only). Slurm's own view of a task (still pending, or ended without recording a run) is the
/// caller's to add (sweep_run::array_points_now): a server answering a page asks no scheduler.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/sweep/sweep.hpp"

namespace expctl::sweep {

/// The folder a sweep's array tasks write their stores (task-<I>.db), outputs and records into:
/// `sweep-<name>` beside `store_file` (the store, or the node-local store with a server as --db).
std::filesystem::path array_dir(const Sweep& sweep, const std::filesystem::path& store_file);

/// One submission of a sweep's points as an array.
struct ArrayRecord {
  std::string job;  ///< the array's job id
  std::string sweep_hash;
  std::vector<size_t> points;  ///< its task ids (= point indices)
  std::string submitted_at;    ///< UTC, store::format_utc
  bool merged = false;         ///< --wait merged its tasks' stores into the store
};

/// Writes `array-<job>.json` into `dir` (atomically). Throws util::Failure naming the file.
void write_array_record(const std::filesystem::path& dir, const ArrayRecord& record);
/// Marks the record of `job` merged (nothing when there is none).
void mark_array_merged(const std::filesystem::path& dir, const std::string& job);
/// The records of `sweep_hash`'s arrays in `dir`, oldest submission first; a record that does not
/// parse is skipped (it names no point this sweep can trust).
std::vector<ArrayRecord> array_records(const std::filesystem::path& dir, const std::string& sweep_hash);

/// A point held by an unmerged array: its newest submission's task and what its store shows.
struct ArrayPoint {
  size_t point = 0;
  std::string job;
  /// "queued" (its task has recorded no run), else its newest run's status in the task's store
  /// ("running", "completed", "failed", ...); the caller may refine "queued" and "running" from
  /// Slurm ("ended": the task ended without a run; "lost": it ended while its run said running).
  std::string state = "queued";
  std::optional<std::string> run{};          ///< that run's id
  std::optional<std::int64_t> step{};        ///< its newest step (rank 0), while it has one
  size_t completed = 0;                      ///< completed runs in the task's store
  std::optional<std::string> slurm_state{};  ///< Slurm's state of the task, where the caller asked
};

/// The points of `sweep` that an unmerged array in `dir` holds, in point order (the newest
/// submission of a point wins).
std::vector<ArrayPoint> array_points(const Sweep& sweep, const std::filesystem::path& dir);

/// Whether the point's runs are the array's to make (the next `sweep` plans none of them): its
/// task is queued or running, or its runs ended completed (or diverged) and wait for the merge.
/// A task that failed, was interrupted, lost or ended without a run holds nothing: the next
/// `sweep` submits the point again (its task resumes the run its store holds).
bool held_by_array(const ArrayPoint& point);

/// [{"point", "job", "state", "run", "step", "completed", "slurm_state"}], null where unknown.
nlohmann::json array_json(const std::vector<ArrayPoint>& points);

/// One line per (array, state): "array 57: running point 3 (step 150), queued points 4, 5".
std::vector<std::string> array_lines(const std::vector<ArrayPoint>& points);

}  // namespace expctl::sweep
