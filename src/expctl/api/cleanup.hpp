#pragma once
/// What `expctl rm` and `expctl gc` do to the store: which runs must not go without being asked,
/// removing runs with their folders, gc's choice of runs, checkpoints and orphaned folders, and
/// compacting the database when that gives back enough space. The CLI chooses, prints and
/// reports; every removal is made here.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "expctl/store/store.hpp"

namespace expctl::api {

/// The run's baseline tag ("baseline:quickstart"), or empty.
std::string baseline_tag(const store::RunRecord& run);

/// One thing a clean-up removes (or would, in a dry run), with the bytes it frees.
struct Removal {
  std::string kind;  ///< "run", "checkpoints", "orphaned folder"
  std::string what;  ///< run id or folder
  std::string note;  ///< "quickstart, failed, 2026-12-01 10:00:00" or "3 files"
  std::int64_t bytes = 0;
};

/// Removes `runs` (rows, then folders), filling each Removal's bytes; nothing in a dry run.
std::vector<Removal> remove_runs(store::Store& db, const std::vector<store::RunRecord>& runs, bool dry_run);

/// What `expctl gc` is asked to collect. Runs go only when `older_than` or `statuses` is given;
/// running runs never.
struct GcRequest {
  std::optional<std::chrono::seconds> older_than{};  ///< runs started longer ago than this
  std::vector<store::RunStatus> statuses{};          ///< runs with one of these statuses (none: any but running)
  std::vector<std::string> keep_tags{};              ///< globs: a run with a matching tag stays
  bool include_tagged = false;                       ///< runs given tags (--tag, ab:, sweep, nightly) may go too
  bool include_baselines = false;                    ///< baseline runs may go too
  bool keep_checkpoints = false;                     ///< leave completed runs' checkpoints alone
  bool dry_run = false;                              ///< remove nothing: say what would go
};

/// Collects what `request` asks for, in order: the runs it names, the checkpoints of completed
/// runs (with their artifact rows; model.pt stays), orphaned run folders; then remembers the
/// folder sizes of runs from before schema v5. Returns every removal (in a dry run, what would go).
std::vector<Removal> collect_garbage(store::Store& db, const GcRequest& request);

/// Compacting the database after a clean-up: done when it gives back at least 4 MiB or a
/// quarter of the file (in a dry run only said).
struct Compaction {
  std::int64_t database_bytes = 0;   ///< before
  std::int64_t free_bytes = 0;       ///< what compacting would give back
  bool pays = false;                 ///< worth doing
  bool compacted = false;            ///< done (never in a dry run)
  std::int64_t compacted_bytes = 0;  ///< the database after, when compacted
};
Compaction compact_if_it_pays(store::Store& db, bool dry_run);

}  // namespace expctl::api
