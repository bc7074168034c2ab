#pragma once
/// Internal to the store module: run ids, the atomic creation of run folders, and which status
/// changes the backends allow.

#include <filesystem>
#include <optional>
#include <string>

#include "expctl/store/backend.hpp"
#include "expctl/store/types.hpp"

namespace expctl::store::detail {

/// "YYYYMMDD-HHMMSS" of `time` in UTC: the part of a run id that all runs started in the same
/// second share.
std::string run_id_second(Clock::time_point time);

/// A new id "YYYYMMDD-HHMMSS-xxxxxx" for a run started at `time`. `greatest_same_second` is the
/// greatest id already stored with the same second; the new id is greater, so ids sort in
/// creation order even within one second. Called under the write lock, which makes it unique.
std::string make_run_id(Clock::time_point time, const std::optional<std::string>& greatest_same_second);

/// The file in a run folder that names the store that created it (Store::folder_owner): `gc`
/// takes a folder its store does not know for an orphan only when the folder is its own, so
/// stores that share one runs/ folder (a node's store and a team server as --db, a Slurm array's
/// task stores) never collect each other's runs.
inline constexpr const char* k_store_marker = "store.json";

/// The owner a run folder names (k_store_marker's "store"), or nullopt for a folder written before
/// folders named their store, or whose marker cannot be read.
std::optional<std::string> folder_owner(const std::filesystem::path& folder);

/// Writes `folder`/k_store_marker naming `owner` (merge, which moves a folder to another store).
void write_folder_owner(const std::filesystem::path& folder, const std::string& owner);

/// Creates `root/id/` holding spec.json (= `canonical_spec`), the store marker naming `owner`,
/// logs/ and checkpoints/: populated in a hidden staging folder under `root` and renamed into
/// place, so it appears whole or not at all. Throws StoreError naming the folder on failure (and
/// leaves no staging folder behind).
void publish_run_folder(const std::filesystem::path& root, const std::string& id, const std::string& canonical_spec,
                        const std::string& owner);

/// Throws StoreError unless resume_run may take a run that is `status` as stored (`how.queued`:
/// only a queued one; otherwise an interrupted, failed, diverged or lost one).
void check_resumable(const std::string& run_id, RunStatus status, const ResumeHow& how);
/// Throws StoreError unless queue_run may take a run whose stored status is `status` (not completed).
void check_queueable(const std::string& run_id, const std::string& status);

}  // namespace expctl::store::detail
