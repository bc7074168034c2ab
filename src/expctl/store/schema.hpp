#pragma once
/// Internal to the store module: the versioned schema and its forward migrations.

#include "expctl/store/connection.hpp"

namespace expctl::store::detail {

/// PRAGMA application_id of expctl databases ("expc"): tells our files from other SQLite files
/// (0 in files written before expctl set it).
inline constexpr int k_sqlite_application_id = 0x65787063;

/// Newest schema version (the number of migration steps).
int schema_latest();

/// Readies an open connection: refuses a file that is not an expctl database or that a newer
/// expctl wrote, switches a writable database to WAL, turns on foreign keys and full sync, and
/// migrates up to `target_version` (each step and the version bump in one IMMEDIATE
/// transaction; with `allow_upgrade` false an older database is refused in one line instead, unwritten).
/// Returns the schema version the database is at afterwards.
int prepare(Connection& connection, int target_version, bool allow_upgrade = true);

}  // namespace expctl::store::detail
