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

/// Compacts the database when that pays (at least 4 MiB back, or a quarter of the file); returns
/// what it did as one line ("" when it did nothing). A dry run says what it would do.
std::string compact_if_it_pays(store::Store& db, bool dry_run, nlohmann::json& document);

/// Prints the removals (text) or puts them into document["removed"] (json), then the total.
void print_removals(const std::vector<Removal>& removals, bool dry_run, const std::string& command,
                    nlohmann::json& document, bool json);

}  // namespace expctl::cli
