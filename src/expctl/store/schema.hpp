#pragma once
/// Internal to the store module: the versioned schema and its forward migrations.

#include "expctl/store/connection.hpp"

namespace expctl::store::detail {

/// Newest schema version (the number of migration steps).
int schema_latest();

/// Readies an open connection: refuses a file that is not an expctl database or that a newer
/// expctl wrote, switches a writable database to WAL, turns on foreign keys and full sync, and
/// migrates up to `target_version` (each step and the version bump in one IMMEDIATE
/// transaction). Returns the schema version the database is at afterwards.
int prepare(Connection& connection, int target_version);

}  // namespace expctl::store::detail
