#pragma once
/// What a run's exit could not ship, picked up without anyone remembering it: the run's last pass
/// (BackgroundShipper::finish) leaves a marker beside the node's store when the server is behind,
/// and the next expctl command on the node that opens the team store starts a background
/// `expctl ship_pending`, which ships under an exclusive lock on the marker and removes it once
/// the server holds everything. (A `sync --follow` service does the same all the time:
/// docs/store.md.)

#include <filesystem>
#include <optional>
#include <string>

#include "expctl/store/ship.hpp"

namespace expctl::store {

/// "<local db>.ship-pending": the marker beside a node's store.
std::filesystem::path pending_marker(const std::filesystem::path& local_db);

/// Writes the marker (its text says when and why, for a person who finds it). Never throws: a
/// marker that cannot be written only means nothing ships before the next run or `sync`.
void mark_pending(const std::filesystem::path& local_db, const std::string& why) noexcept;

/// True when the marker is there.
bool has_pending(const std::filesystem::path& local_db);

/// What ship_pending did.
struct PendingPass {
  bool ran = false;  ///< false: another process holds the marker's lock, or there is no marker
  ShipReport report{};
  ShipLag lag{};  ///< after the pass; the marker is removed when it is zero
};

/// One shipping pass of `local_db` to `server` under an exclusive lock on the marker (taken
/// without waiting: a second caller returns at once, ran = false). Throws store::Error when the
/// server fails; the marker stays then.
PendingPass ship_pending(const std::filesystem::path& local_db, const std::string& server,
                         const StoreOptions& options = {});

}  // namespace expctl::store
