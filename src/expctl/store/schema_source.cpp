// The store's schema, described once and rendered per dialect (schema_source.hpp).
//
// Where the two backends differ, the difference is a property here, with its reason:
// - Series are chunks on both (SQLite v8, PostgreSQL v6): a value is its 64-bit pattern, in a
//   chunk's bytes or an open point's `bits`, so NaN payloads, ±Inf and -0.0 are kept by both.
// - PostgreSQL compares text by the database's collation: keys and the text expctl sorts by are
//   `COLLATE "C"` (byte order, as SQLite's default BINARY), so both backends list in one order.
// - SQLite's child tables are WITHOUT ROWID (the primary key is the table); its metric_chunks
//   keeps a rowid and a unique index on the last step, PostgreSQL's a key on the first step.
// - PostgreSQL's series tables declare no foreign keys: a key is checked by a trigger per row,
//   which made COPY into its old metrics table 3x slower (26 against 8 s for 1 M points). The
//   writers hold the run's row once a batch instead (`SELECT ... FOR KEY SHARE`, what the trigger
//   takes per row), metric key ids come from metric_keys, which nothing deletes from, and deleting
//   a run deletes its series in the same transaction (pg_schema.cpp, v3 and v6).
// - Each has what only it needs: SQLite's runs.folder_bytes (the size of a finished run's folder,
//   which is on this node), PostgreSQL's version row and the shipper's progress tables.
#include "expctl/store/schema_source.hpp"

#include <span>

#include <fmt/format.h>

namespace expctl::store::detail {

namespace {

enum class Type {
  text,
  int32,
  int64,
  boolean,
  value,      ///< a metric value: REAL (NULL for NaN) / double precision NOT NULL
  real,       ///< a number that may be NULL: REAL / double precision
  bytes,      ///< BLOB / bytea
  serial_key  ///< an integer key the database numbers: INTEGER PRIMARY KEY / identity
};

enum class Only { both, sqlite, postgres };

struct Column {
  const char* name;
  Type type;
  bool not_null = false;
  bool primary_key = false;          ///< a one-column primary key
  bool bytewise = false;             ///< COLLATE "C" on PostgreSQL
  bool unique = false;
  const char* default_value = nullptr;  ///< an SQL literal, the same in both dialects
  const char* check = nullptr;          ///< the column's CHECK expression
  const char* references = nullptr;     ///< "table(column)"
  bool cascade = false;                 ///< ON DELETE CASCADE
  Only references_in = Only::both;      ///< where the REFERENCES is declared
  Only only = Only::both;
  /// PostgreSQL: STORAGE MAIN (bytes compressed already stay in their row where it fits a page;
  /// CREATE TABLE says it only from PostgreSQL 16, so an ALTER follows the table).
  bool keep_in_row = false;
};

struct Index {
  const char* name;
  const char* table;
  const char* columns;
  Only only = Only::both;
  bool unique = false;
};

struct Table {
  const char* name;
  std::span<const Column> columns;
  const char* primary_key = nullptr;  ///< columns of a primary key over several columns
  const char* include = nullptr;      ///< PostgreSQL: columns the primary key's index carries
  const char* check = nullptr;        ///< a CHECK over several columns
  bool without_rowid = false;         ///< SQLite
  Only only = Only::both;
};

constexpr const char* k_statuses =
    "status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost')";
/// A run may wait for its scheduler's job (SQLite v7, PostgreSQL v5); a rank never does.
constexpr const char* k_run_statuses =
    "status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost', 'queued')";

constexpr Column k_schema_version[] = {
    {.name = "singleton", .type = Type::boolean, .primary_key = true, .default_value = "true", .check = "singleton"},
    {.name = "version", .type = Type::int32, .not_null = true},
};
constexpr Column k_specs[] = {
    {.name = "hash", .type = Type::text, .not_null = true, .primary_key = true, .bytewise = true},
    {.name = "name", .type = Type::text, .not_null = true},
    {.name = "canonical", .type = Type::text, .not_null = true},
    {.name = "created_at", .type = Type::text, .not_null = true},
};
constexpr Column k_environments[] = {
    {.name = "hash", .type = Type::text, .not_null = true, .primary_key = true, .bytewise = true},
    {.name = "fingerprint", .type = Type::text, .not_null = true},
    {.name = "created_at", .type = Type::text, .not_null = true},
};
constexpr Column k_runs[] = {
    {.name = "id", .type = Type::text, .not_null = true, .primary_key = true, .bytewise = true},
    {.name = "spec_hash", .type = Type::text, .not_null = true, .bytewise = true, .references = "specs(hash)"},
    {.name = "environment_hash", .type = Type::text, .bytewise = true, .references = "environments(hash)"},
    {.name = "name", .type = Type::text, .not_null = true},
    {.name = "status", .type = Type::text, .not_null = true, .check = k_run_statuses},
    {.name = "started_at", .type = Type::text, .not_null = true, .bytewise = true},
    {.name = "ended_at", .type = Type::text},
    {.name = "exit_code", .type = Type::int32},
    {.name = "root_cause", .type = Type::text, .not_null = true, .default_value = "''"},
    {.name = "run_dir", .type = Type::text, .not_null = true},
    {.name = "summary", .type = Type::text, .not_null = true, .default_value = "'{}'"},
    {.name = "owner_host", .type = Type::text},
    {.name = "owner_pid", .type = Type::int64},
    {.name = "owner_boot_id", .type = Type::text},
    {.name = "owner_start_ticks", .type = Type::int64},
    {.name = "heartbeat_at", .type = Type::text},
    {.name = "folder_bytes", .type = Type::int64, .only = Only::sqlite},
};
constexpr Column k_ranks[] = {
    {.name = "run_id", .type = Type::text, .not_null = true, .bytewise = true, .references = "runs(id)", .cascade = true},
    {.name = "rank", .type = Type::int32, .not_null = true, .check = "rank >= 0"},
    {.name = "host", .type = Type::text, .not_null = true},
    {.name = "pid", .type = Type::int64},
    {.name = "environment_hash", .type = Type::text, .bytewise = true, .references = "environments(hash)"},
    {.name = "status", .type = Type::text, .not_null = true, .check = k_statuses},
    {.name = "exit_code", .type = Type::int32},
    {.name = "signal", .type = Type::int32},
};
constexpr Column k_metric_keys[] = {
    {.name = "id", .type = Type::serial_key},
    {.name = "name", .type = Type::text, .not_null = true, .bytewise = true, .unique = true, .check = "name <> ''"},
};
/// The columns that name a series, first in both of its tables (SQLite v8, PostgreSQL v6; no
/// foreign keys on PostgreSQL, as metrics had none since v3).
constexpr Column k_series_run = {.name = "run_id",
                                 .type = Type::text,
                                 .not_null = true,
                                 .bytewise = true,
                                 .references = "runs(id)",
                                 .cascade = true,
                                 .references_in = Only::sqlite};
constexpr Column k_series_key = {.name = "key_id",
                                 .type = Type::int32,
                                 .not_null = true,
                                 .references = "metric_keys(id)",
                                 .references_in = Only::sqlite};
constexpr Column k_series_rank = {.name = "rank", .type = Type::int32, .not_null = true, .check = "rank >= 0"};
/// SQLite v8, PostgreSQL v6: a sealed chunk of a series (chunk_codec.hpp) with its header. min/max/sum are over
/// the values that are not NaN (min and max NULL when every value is NaN, sum NULL when it is NaN).
constexpr Column k_metric_chunks[] = {
    k_series_run,
    k_series_key,
    k_series_rank,
    {.name = "first_step", .type = Type::int64, .not_null = true},
    {.name = "last_step", .type = Type::int64, .not_null = true},
    {.name = "points", .type = Type::int64, .not_null = true, .check = "points > 0"},
    {.name = "nan_points", .type = Type::int64, .not_null = true},
    {.name = "min_value", .type = Type::real},
    {.name = "max_value", .type = Type::real},
    {.name = "sum_value", .type = Type::real},
    {.name = "first_bits", .type = Type::int64, .not_null = true},
    {.name = "last_bits", .type = Type::int64, .not_null = true},
    {.name = "data", .type = Type::bytes, .not_null = true, .keep_in_row = true},
};
/// SQLite v8, PostgreSQL v6: the open chunk's points, one row each, a value as its 64-bit pattern.
constexpr Column k_metric_points[] = {
    k_series_run,
    k_series_key,
    k_series_rank,
    {.name = "step", .type = Type::int64, .not_null = true},
    {.name = "bits", .type = Type::int64, .not_null = true},
};
constexpr Column k_artifacts[] = {
    {.name = "run_id", .type = Type::text, .not_null = true, .bytewise = true, .references = "runs(id)", .cascade = true},
    {.name = "path", .type = Type::text, .not_null = true, .bytewise = true, .check = "path <> ''"},
    {.name = "sha256", .type = Type::text, .not_null = true, .check = "length(sha256) = 64"},
    {.name = "size_bytes", .type = Type::int64, .not_null = true, .check = "size_bytes >= 0"},
};
constexpr Column k_tags[] = {
    {.name = "run_id", .type = Type::text, .not_null = true, .bytewise = true, .references = "runs(id)", .cascade = true},
    {.name = "tag", .type = Type::text, .not_null = true, .bytewise = true, .check = "tag <> ''"},
};
constexpr Column k_ship_progress[] = {
    {.name = "run_id",
     .type = Type::text,
     .not_null = true,
     .bytewise = true,
     .references = "runs(id)",
     .cascade = true},
    {.name = "key_id", .type = Type::int32, .not_null = true, .references = "metric_keys(id)"},
    {.name = "rank", .type = Type::int32, .not_null = true},
    {.name = "last_step", .type = Type::int64, .not_null = true},
    {.name = "rewrites", .type = Type::int64, .not_null = true, .default_value = "0"},
};
/// SQLite: how many times points were written into a series at or below a step it had already
/// (a program logging late, a step logged again, a resume re-logging the steps after its
/// checkpoint). A shipper that sent the series up to some step sends it again when this grows.
constexpr Column k_series_rewrites[] = {
    {.name = "run_id",
     .type = Type::text,
     .not_null = true,
     .bytewise = true,
     .references = "runs(id)",
     .cascade = true},
    {.name = "key_id", .type = Type::int32, .not_null = true, .references = "metric_keys(id)"},
    {.name = "rank", .type = Type::int32, .not_null = true},
    {.name = "rewrites", .type = Type::int64, .not_null = true},
};
constexpr Column k_ship_state[] = {
    {.name = "run_id",
     .type = Type::text,
     .primary_key = true,
     .bytewise = true,
     .references = "runs(id)",
     .cascade = true},
    {.name = "digest", .type = Type::text, .not_null = true},
    {.name = "complete", .type = Type::boolean, .not_null = true},
    {.name = "node", .type = Type::text, .not_null = true},
    {.name = "shipped_at", .type = Type::text, .not_null = true},
    {.name = "lost", .type = Type::boolean, .not_null = true, .default_value = "false"},
};

constexpr Table k_tables[] = {
    {.name = "expctl_schema", .columns = k_schema_version, .only = Only::postgres},
    {.name = "specs", .columns = k_specs},
    {.name = "environments", .columns = k_environments},
    {.name = "runs",
     .columns = k_runs,
     .check = "(owner_host IS NULL) = (owner_pid IS NULL) AND (owner_pid IS NULL) = (owner_boot_id IS NULL) "
              "AND (owner_boot_id IS NULL) = (owner_start_ticks IS NULL)"},
    {.name = "ranks", .columns = k_ranks, .primary_key = "run_id, rank", .without_rowid = true},
    {.name = "metric_keys", .columns = k_metric_keys},
    {.name = "metric_chunks", .columns = k_metric_chunks, .only = Only::sqlite},
    // A chunk is found by its series and first step; SQLite's rowid table has a unique index on
    // the last step instead (metric_chunks_by_series).
    {.name = "metric_chunks",
     .columns = k_metric_chunks,
     .primary_key = "run_id, key_id, rank, first_step",
     .only = Only::postgres},
    {.name = "metric_points",
     .columns = k_metric_points,
     .primary_key = "run_id, key_id, rank, step",
     .without_rowid = true},
    {.name = "artifacts", .columns = k_artifacts, .primary_key = "run_id, path", .without_rowid = true},
    {.name = "tags", .columns = k_tags, .primary_key = "run_id, tag", .without_rowid = true},
    {.name = "ship_progress",
     .columns = k_ship_progress,
     .primary_key = "run_id, key_id, rank",
     .only = Only::postgres},
    {.name = "ship_state", .columns = k_ship_state, .only = Only::postgres},
    {.name = "series_rewrites",
     .columns = k_series_rewrites,
     .primary_key = "run_id, key_id, rank",
     .without_rowid = true,
     .only = Only::sqlite},
};

/// Indexes besides the keys. runs_by_start orders `list` (newest first); SQLite breaks ties by
/// rowid, which every index holds, PostgreSQL by id.
constexpr Index k_indexes[] = {
    {.name = "runs_by_start", .table = "runs", .columns = "started_at", .only = Only::sqlite},
    {.name = "runs_by_start", .table = "runs", .columns = "started_at, id", .only = Only::postgres},
    {.name = "runs_by_spec", .table = "runs", .columns = "spec_hash"},
    {.name = "tags_by_tag", .table = "tags", .columns = "tag"},
    {.name = "metric_chunks_by_series",
     .table = "metric_chunks",
     .columns = "run_id, key_id, rank, last_step",
     .only = Only::sqlite,
     .unique = true},
};

bool in(Only only, Dialect dialect) {
  return only == Only::both || (only == Only::sqlite) == (dialect == Dialect::sqlite);
}

std::string column_sql(const Column& column, Dialect dialect) {
  const bool sqlite = dialect == Dialect::sqlite;
  std::string sql = column.name;
  switch (column.type) {
    case Type::text:
      sql += sqlite ? " TEXT" : " text";
      break;
    case Type::int32:
      sql += sqlite ? " INTEGER" : " integer";
      break;
    case Type::int64:
      sql += sqlite ? " INTEGER" : " bigint";
      break;
    case Type::boolean:
      sql += sqlite ? " INTEGER" : " boolean";
      break;
    case Type::value:
      return sql + (sqlite ? " REAL" : " double precision NOT NULL");
    case Type::real:
      sql += sqlite ? " REAL" : " double precision";
      break;
    case Type::bytes:
      sql += sqlite ? " BLOB" : " bytea";
      break;
    case Type::serial_key:
      return sql + (sqlite ? " INTEGER PRIMARY KEY" : " integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY");
  }
  if (column.bytewise && !sqlite) {
    sql += " COLLATE \"C\"";
  }
  if (column.primary_key) {
    sql += " PRIMARY KEY";
  }
  // PostgreSQL's primary key implies NOT NULL; SQLite's does not (a historical quirk), so it says it.
  if (column.not_null && (sqlite || !column.primary_key)) {
    sql += " NOT NULL";
  }
  if (column.unique) {
    sql += " UNIQUE";
  }
  if (column.default_value != nullptr) {
    sql += fmt::format(" DEFAULT {}", column.default_value);
  }
  if (column.check != nullptr) {
    sql += fmt::format(" CHECK ({})", column.check);
  }
  if (column.references != nullptr && in(column.references_in, dialect)) {
    sql += fmt::format(" REFERENCES {}", column.references);
    if (column.cascade) {
      sql += " ON DELETE CASCADE";
    }
  }
  return sql;
}

std::string table_sql(const Table& table, Dialect dialect) {
  std::string sql = fmt::format("CREATE TABLE {} (", table.name);
  const char* separator = "\n  ";
  for (const Column& column : table.columns) {
    if (in(column.only, dialect)) {
      sql += separator + column_sql(column, dialect);
      separator = ",\n  ";
    }
  }
  if (table.primary_key != nullptr) {
    sql += fmt::format(",\n  PRIMARY KEY ({})", table.primary_key);
    if (table.include != nullptr && dialect == Dialect::postgres) {
      sql += fmt::format(" INCLUDE ({})", table.include);
    }
  }
  if (table.check != nullptr) {
    sql += fmt::format(",\n  CHECK ({})", table.check);
  }
  sql += "\n)";
  if (table.without_rowid && dialect == Dialect::sqlite) {
    sql += " WITHOUT ROWID";
  }
  return sql + ";\n";
}

}  // namespace

std::string create_schema_sql(Dialect dialect) {
  std::string sql;
  for (const Table& table : k_tables) {
    if (!in(table.only, dialect)) {
      continue;
    }
    sql += table_sql(table, dialect);
    for (const Column& column : table.columns) {
      if (column.keep_in_row && dialect == Dialect::postgres) {
        sql += fmt::format("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN;\n", table.name, column.name);
      }
    }
    for (const Index& index : k_indexes) {
      if (std::string_view(index.table) == table.name && in(index.only, dialect)) {
        sql += fmt::format("CREATE {}INDEX {} ON {}({});\n", index.unique ? "UNIQUE " : "", index.name, index.table,
                           index.columns);
      }
    }
  }
  return sql;
}

}  // namespace expctl::store::detail
