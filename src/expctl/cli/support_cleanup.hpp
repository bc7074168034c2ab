#pragma once
/// What `expctl rm` and `expctl gc` share: which runs must not go without being asked, removing
/// runs with their folders, and compacting the database when that gives back enough space.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"

namespace expctl::cli {

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

/// What `rm` and `gc` end with: the removals (text lines, or document["removed"] in JSON) and
/// their total, then a compaction of the database when that pays (at least 4 MiB back, or a
/// quarter of the file; a dry run says what it would do), under the JSON envelope of `command`.
void report_removals(store::Store& db, const std::vector<Removal>& removals, bool dry_run, const std::string& command,
                     bool json);

}  // namespace expctl::cli
