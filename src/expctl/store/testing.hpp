#pragma once
/// Hooks for tests only: build databases at an old schema version, or reach the SQL directly to
/// prove what the schema itself enforces. Production code never calls these.

#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/store.hpp"

namespace expctl::store::testing {

/// Opens (creating) the database at `path` and migrates it up to `version` only, not further.
/// The write API works on it where a call needs nothing newer than `version`.
Store open_at_schema_version(const std::filesystem::path& path, int version);

/// The PostgreSQL store at `conninfo`, created or migrated up to `version` only, not further.
Store open_postgres_at_schema_version(const std::string& conninfo, int version);

/// The shape of the store's schema at `location` (a SQLite path or a PostgreSQL conninfo), one
/// line per table, column, key, reference, check and index, in a fixed order: two stores with the
/// same text have the same schema, however each got there.
std::string describe_schema(const std::string& location);

/// Caps the database file of `store`'s connection at `max_pages` pages, so that writes past it
/// fail exactly as they do on a full disk (SQLITE_FULL).
void limit_database_pages(Store& store, int max_pages);

/// One series' sealed chunks, each its header and bytes (chunk::summarize, chunk::encode).
struct SealedSeries {
  std::string name;
  int rank = 0;
  std::vector<std::pair<chunk::Header, std::string>> chunks{};
};

/// Writes sealed chunks straight into the SQLite store's chunk table (no open point), in one
/// transaction: bench/store's generator of large stores, which encodes them on several threads.
/// Each series' steps must lie above every point it holds already; nothing checks that.
void append_sealed_chunks(Store& store, const std::string& run_id, std::span<const SealedSeries> series);

/// Runs raw SQL statements on the database at `path` (errors as StoreError).
void execute_sql(const std::filesystem::path& path, const std::string& sql);

/// The first column of the first row of `sql` on the database at `path`, as text.
std::string query_sqlite(const std::filesystem::path& path, const std::string& sql);

/// Runs raw SQL statements on the PostgreSQL server of `conninfo` (errors as store::Error).
void execute_postgres_sql(const std::string& conninfo, const std::string& sql);

/// The first column of the first row of `sql` on the server of `conninfo`, as text.
std::string query_postgres(const std::string& conninfo, const std::string& sql);

/// SQL counting the points a PostgreSQL store holds (schema v6: its sealed chunks' and its open
/// points); `run_filter`, e.g. "run_id = '…'", limits it to some rows of both tables.
std::string postgres_points_sql(const std::string& run_filter = "true");

}  // namespace expctl::store::testing
