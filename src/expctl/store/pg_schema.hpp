#pragma once
/// Internal to the store module: the PostgreSQL schema, its forward migrations and version.

#include "expctl/store/pg_connection.hpp"

namespace expctl::store::detail {

/// Newest PostgreSQL schema version (the number of its migration steps).
int pg_schema_latest();

/// Readies a connection: refuses a database with expctl-looking tables but no version, or one a
/// newer expctl wrote ("upgrade expctl", nothing changed), and otherwise migrates it up to
/// `target_version` in one transaction under an advisory lock (so two nodes starting at once
/// migrate it once). `may_write` false: an older schema is refused instead of upgraded. Returns
/// the version the database is at.
int pg_prepare(PgConnection& connection, int target_version, bool may_write);

}  // namespace expctl::store::detail
