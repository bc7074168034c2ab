#include "expctl/store/schema.hpp"

#include <filesystem>
#include <iterator>

#include <sqlite3.h>

#include "expctl/store/schema_source.hpp"
#include "expctl/store/sqlite_chunks.hpp"
#include "expctl/util/log.hpp"

namespace expctl::store::detail {

namespace {

constexpr int k_application_id = k_sqlite_application_id;

struct Migration {
  int version;              ///< the schema version this step produces
  const char* description;  ///< why the step exists
  const char* sql;
  /// Run after `sql`, in the same transaction, for what SQL cannot do (v8: encoding chunks).
  void (*convert)(SQLite::Database&) = nullptr;
};

/// Forward migrations of an existing database, applied in order. Never edit a shipped step:
/// append a new one, and change schema_source.cpp to the shape it makes (a new database is
/// created from there; test_schema_source.cpp fails until both agree).
/// Metric values are nullable because SQLite stores a NaN (a diverged loss) as NULL.
constexpr Migration k_migrations[] = {
    {1, "initial schema", R"sql(
CREATE TABLE specs (
  hash       TEXT PRIMARY KEY NOT NULL,
  name       TEXT NOT NULL,
  canonical  TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE environments (
  hash        TEXT PRIMARY KEY NOT NULL,
  fingerprint TEXT NOT NULL,
  created_at  TEXT NOT NULL
);
CREATE TABLE runs (
  id               TEXT PRIMARY KEY NOT NULL,
  spec_hash        TEXT NOT NULL REFERENCES specs(hash),
  environment_hash TEXT REFERENCES environments(hash),
  name             TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
  started_at       TEXT NOT NULL,
  ended_at         TEXT,
  exit_code        INTEGER,
  root_cause       TEXT NOT NULL DEFAULT '',
  run_dir          TEXT NOT NULL
);
CREATE TABLE ranks (
  run_id           TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank             INTEGER NOT NULL CHECK (rank >= 0),
  host             TEXT NOT NULL,
  pid              INTEGER,
  environment_hash TEXT REFERENCES environments(hash),
  status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
  exit_code        INTEGER,
  signal           INTEGER,
  PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
CREATE TABLE metrics (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name   TEXT NOT NULL CHECK (name <> ''),
  rank   INTEGER NOT NULL CHECK (rank >= 0),
  step   INTEGER NOT NULL,
  value  REAL,
  PRIMARY KEY (run_id, name, rank, step)
) WITHOUT ROWID;
CREATE TABLE artifacts (
  run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  path       TEXT NOT NULL CHECK (path <> ''),
  sha256     TEXT NOT NULL CHECK (length(sha256) = 64),
  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
  PRIMARY KEY (run_id, path)
) WITHOUT ROWID;
CREATE TABLE tags (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag    TEXT NOT NULL CHECK (tag <> ''),
  PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
)sql"},
    {2, "run summary (written by the runner at the end) and indexes for list filters", R"sql(
ALTER TABLE runs ADD COLUMN summary TEXT NOT NULL DEFAULT '{}';
CREATE INDEX runs_by_start ON runs(started_at);
CREATE INDEX runs_by_spec ON runs(spec_hash);
CREATE INDEX tags_by_tag ON tags(tag);
)sql"},
    // SQLite cannot change a CHECK constraint in place: both tables are rebuilt as
    // https://www.sqlite.org/lang_altertable.html ("other kinds of table schema changes") says,
    // with foreign keys off (apply_migrations) so that dropping runs cascades to no child row.
    // rowid is copied: list_runs orders runs of the same start time by it.
    {3, "statuses diverged and lost; run owner process and heartbeat", R"sql(
CREATE TABLE runs_v3 (
  id                TEXT PRIMARY KEY NOT NULL,
  spec_hash         TEXT NOT NULL REFERENCES specs(hash),
  environment_hash  TEXT REFERENCES environments(hash),
  name              TEXT NOT NULL,
  status            TEXT NOT NULL
                    CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost')),
  started_at        TEXT NOT NULL,
  ended_at          TEXT,
  exit_code         INTEGER,
  root_cause        TEXT NOT NULL DEFAULT '',
  run_dir           TEXT NOT NULL,
  summary           TEXT NOT NULL DEFAULT '{}',
  owner_host        TEXT,
  owner_pid         INTEGER,
  owner_boot_id     TEXT,
  owner_start_ticks INTEGER,
  heartbeat_at      TEXT,
  CHECK ((owner_host IS NULL) = (owner_pid IS NULL) AND (owner_pid IS NULL) = (owner_boot_id IS NULL)
         AND (owner_boot_id IS NULL) = (owner_start_ticks IS NULL))
);
INSERT INTO runs_v3 (rowid, id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code,
                     root_cause, run_dir, summary)
  SELECT rowid, id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause,
         run_dir, summary FROM runs ORDER BY rowid;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE INDEX runs_by_start ON runs(started_at);
CREATE INDEX runs_by_spec ON runs(spec_hash);
CREATE TABLE ranks_v3 (
  run_id           TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank             INTEGER NOT NULL CHECK (rank >= 0),
  host             TEXT NOT NULL,
  pid              INTEGER,
  environment_hash TEXT REFERENCES environments(hash),
  status           TEXT NOT NULL
                   CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost')),
  exit_code        INTEGER,
  signal           INTEGER,
  PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;
INSERT INTO ranks_v3 SELECT run_id, rank, host, pid, environment_hash, status, exit_code, signal FROM ranks;
DROP TABLE ranks;
ALTER TABLE ranks_v3 RENAME TO ranks;
)sql"},
    // The big table holds an integer key per point instead of the metric's name (as the
    // PostgreSQL schema does from its v1): 4 + 8 + 8 bytes of key and payload a point beside the
    // run id, not a name of 10-30 bytes. Every run's points are carried over through the names.
    {4, "integer metric keys in the metrics table (metric_keys holds the names)", R"sql(
CREATE TABLE metric_keys (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE CHECK (name <> '')
);
INSERT INTO metric_keys (name) SELECT DISTINCT name FROM metrics ORDER BY name;
CREATE TABLE metrics_v4 (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id INTEGER NOT NULL REFERENCES metric_keys(id),
  rank   INTEGER NOT NULL CHECK (rank >= 0),
  step   INTEGER NOT NULL,
  value  REAL,
  PRIMARY KEY (run_id, key_id, rank, step)
) WITHOUT ROWID;
INSERT INTO metrics_v4 (run_id, key_id, rank, step, value)
  SELECT m.run_id, k.id, m.rank, m.step, m.value FROM metrics m JOIN metric_keys k ON k.name = m.name
  ORDER BY m.run_id, k.id, m.rank, m.step;
DROP TABLE metrics;
ALTER TABLE metrics_v4 RENAME TO metrics;
)sql"},
    // Store::folders_bytes (the size `list` prints) walked every run folder: 10 000 runs took most
    // of a second. A finished run's folder size is remembered here (NULL: walk it).
    {5, "the bytes of a finished run's folder", R"sql(
ALTER TABLE runs ADD COLUMN folder_bytes INTEGER;
)sql"},
    // The shipper sends a series' points past the last step it sent: a point written at or below
    // that step (logged late, logged again, a resume's re-logged steps) never reached the server.
    // The writer counts such writes per series here; the shipper sends the series again when the
    // count grew (ship.cpp).
    {6, "series_rewrites: writes at or below a series' last step, for the shipper", R"sql(
CREATE TABLE series_rewrites (
  run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id   INTEGER NOT NULL REFERENCES metric_keys(id),
  rank     INTEGER NOT NULL,
  rewrites INTEGER NOT NULL,
  PRIMARY KEY (run_id, key_id, rank)
) WITHOUT ROWID;
)sql"},
    // `run --slurm` records a run at submission, before its job starts it: `queued`, owned by no
    // process. The runs table is rebuilt as v3's was (a CHECK changes only so), every column and
    // rowid kept.
    {7, "status queued (a run waiting for its scheduler job)", R"sql(
CREATE TABLE runs_v7 (
  id                TEXT PRIMARY KEY NOT NULL,
  spec_hash         TEXT NOT NULL REFERENCES specs(hash),
  environment_hash  TEXT REFERENCES environments(hash),
  name              TEXT NOT NULL,
  status            TEXT NOT NULL
                    CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost', 'queued')),
  started_at        TEXT NOT NULL,
  ended_at          TEXT,
  exit_code         INTEGER,
  root_cause        TEXT NOT NULL DEFAULT '',
  run_dir           TEXT NOT NULL,
  summary           TEXT NOT NULL DEFAULT '{}',
  owner_host        TEXT,
  owner_pid         INTEGER,
  owner_boot_id     TEXT,
  owner_start_ticks INTEGER,
  heartbeat_at      TEXT,
  folder_bytes      INTEGER,
  CHECK ((owner_host IS NULL) = (owner_pid IS NULL) AND (owner_pid IS NULL) = (owner_boot_id IS NULL)
         AND (owner_boot_id IS NULL) = (owner_start_ticks IS NULL))
);
INSERT INTO runs_v7 (rowid, id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code,
                     root_cause, run_dir, summary, owner_host, owner_pid, owner_boot_id, owner_start_ticks,
                     heartbeat_at, folder_bytes)
  SELECT rowid, id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause,
         run_dir, summary, owner_host, owner_pid, owner_boot_id, owner_start_ticks, heartbeat_at, folder_bytes
  FROM runs ORDER BY rowid;
DROP TABLE runs;
ALTER TABLE runs_v7 RENAME TO runs;
CREATE INDEX runs_by_start ON runs(started_at);
CREATE INDEX runs_by_spec ON runs(spec_hash);
)sql"},
    // A point was a row of 44-46 bytes (the run id, key, rank and step in the row and its key).
    // Series are now sealed chunks of up to 4096 points (sqlite_chunks.hpp, chunk_codec.hpp),
    // each one row with its header, plus the open chunk's points one row each, their values as bit
    // patterns (a REAL column stores NaN as NULL and drops the sign of -0.0). Every point of the
    // metrics table goes into chunks here, in this transaction; then the table is dropped.
    {8, "series stored as compressed chunks", R"sql(
CREATE TABLE metric_chunks (
  run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id     INTEGER NOT NULL REFERENCES metric_keys(id),
  rank       INTEGER NOT NULL CHECK (rank >= 0),
  first_step INTEGER NOT NULL,
  last_step  INTEGER NOT NULL,
  points     INTEGER NOT NULL CHECK (points > 0),
  nan_points INTEGER NOT NULL,
  min_value  REAL,
  max_value  REAL,
  sum_value  REAL,
  first_bits INTEGER NOT NULL,
  last_bits  INTEGER NOT NULL,
  data       BLOB NOT NULL
);
CREATE UNIQUE INDEX metric_chunks_by_series ON metric_chunks(run_id, key_id, rank, last_step);
CREATE TABLE metric_points (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id INTEGER NOT NULL REFERENCES metric_keys(id),
  rank   INTEGER NOT NULL CHECK (rank >= 0),
  step   INTEGER NOT NULL,
  bits   INTEGER NOT NULL,
  PRIMARY KEY (run_id, key_id, rank, step)
) WITHOUT ROWID;
)sql",
     &chunk_metrics_table},
    // No table changes: sealed chunks may now be in format 3 (decimals, chunk_codec.hpp), which
    // an expctl of v8 cannot decode. The version makes it refuse the store when it opens it, in
    // one line ("written by a newer expctl"), instead of failing on the first series holding such
    // a chunk. Every v8 chunk (format 1 or 2) is read as it is.
    {9, "chunks may be in format 3 (decimals)", ""},
};

constexpr int k_latest = static_cast<int>(std::size(k_migrations));

struct Identity {
  int version = 0;
  int application_id = 0;
  bool has_tables = false;
};

// One statement, so one snapshot: read as three statements, a process creating the same new
// database could commit its schema between them, and the reader would see tables without
// expctl's application_id and call the file foreign (seen with 4 writers on a loaded machine).
Identity read_identity(SQLite::Database& db) {
  SQLite::Statement query(db,
                          "SELECT (SELECT user_version FROM pragma_user_version), "
                          "(SELECT application_id FROM pragma_application_id), "
                          "(SELECT count(*) FROM sqlite_master)");
  Identity identity;
  if (query.executeStep()) {
    identity.version = query.getColumn(0).getInt();
    identity.application_id = query.getColumn(1).getInt();
    identity.has_tables = query.getColumn(2).getInt() > 0;
  }
  return identity;
}

/// Throws unless the file is an expctl database this expctl can read (or a new, empty one).
void check_identity(const Connection& connection, const Identity& identity) {
  const bool foreign = identity.application_id != 0 ? identity.application_id != k_application_id
                                                    : identity.version != 0 || identity.has_tables;
  if (foreign) {
    throw util::StoreError(
        fmt::format("{}: a SQLite database, but not one of expctl's: check --db / EXPCTL_DB", connection.display()));
  }
  if (identity.version > k_latest) {
    throw util::StoreError(
        fmt::format("{}: written by a newer expctl (schema v{}, this one reads up to v{}): upgrade expctl",
                    connection.display(), identity.version, k_latest));
  }
}

/// Throws unless every reference between rows holds (checked after a migration, which runs with
/// foreign keys off).
void check_foreign_keys(const Connection& connection, SQLite::Database& db, int version) {
  SQLite::Statement check(db, "PRAGMA foreign_key_check");
  EXPCTL_CHECK(!check.executeStep(), util::StoreError,
               "{}: cannot migrate to schema v{}: table {} has rows that reference missing rows (see sqlite3's "
               "\"PRAGMA foreign_key_check\"); the store is unchanged",
               connection.display(), version, check.getColumn(0).getString());
}

void apply_migrations(Connection& connection, int target_version) {
  // Off while a step rebuilds a table: dropping the old runs table would otherwise delete every
  // child row (ON DELETE CASCADE). A no-op inside a transaction, hence here; prepare turns it on.
  connection.retry([&] { connection.db().exec("PRAGMA foreign_keys = OFF"); });
  connection.write([&](SQLite::Database& db) {
    // Read again under the write lock: another process may have migrated meanwhile.
    const Identity identity = read_identity(db);
    check_identity(connection, identity);
    if (identity.version == 0 && target_version == k_latest) {
      // A new database is made from the one schema source; the steps below carry older ones.
      db.exec(create_schema_sql(Dialect::sqlite));
      util::log::debug(fmt::format("store: created {} at schema v{}", connection.display(), target_version));
    } else {
      for (const Migration& step : k_migrations) {
        if (step.version > identity.version && step.version <= target_version) {
          db.exec(step.sql);
          if (step.convert != nullptr) {
            step.convert(db);
          }
          util::log::debug(fmt::format("store: migrated {} to schema v{} ({})", connection.display(), step.version,
                                       step.description));
        }
      }
    }
    if (target_version > identity.version) {
      check_foreign_keys(connection, db, target_version);
      // PRAGMAs take no bound parameters; both values are our own integers, never user input.
      db.exec(fmt::format("PRAGMA application_id = {}", k_application_id));
      db.exec(fmt::format("PRAGMA user_version = {}", target_version));
    }
  });
}

std::string journal_mode(Connection& connection, const char* pragma) {
  return connection.retry([&] { return connection.db().execAndGet(pragma).getString(); });
}

/// Switches to WAL unless the database is in WAL already (asking costs no write, setting may).
void use_wal(Connection& connection) {
  if (journal_mode(connection, "PRAGMA journal_mode") == "wal") {
    return;
  }
  const std::string mode = journal_mode(connection, "PRAGMA journal_mode = WAL");
  if (mode != "wal") {
    util::log::warn(fmt::format("{}: cannot use WAL journaling here (got \"{}\"); concurrent writers will wait longer",
                                connection.display(), mode));
  }
}

/// Says when an immutable read misses changes: they are in a -wal file nobody could checkpoint.
void warn_if_wal_left(const Connection& connection) {
  std::error_code ec;
  const auto wal_bytes = std::filesystem::file_size(connection.path().string() + "-wal", ec);
  if (!ec && wal_bytes > 0) {
    util::log::warn(
        fmt::format("{}: read without the {} bytes of its -wal file (the latest changes may be missing): "
                    "open it once where it is writable and has space to apply them",
                    connection.display(), wal_bytes));
  }
}

/// The first read of the file. Where it fails only because SQLite cannot create the -wal/-shm
/// files a WAL reader needs (read-only storage, a full disk), the file is opened again immutable:
/// it can still be read, and every write fails with the message of what refused the files.
Identity read_first(Connection& connection) {
  try {
    return connection.retry_busy([&] { return read_identity(connection.db()); });
  } catch (const SQLite::Exception& error) {
    const int code = connection.code_of(error);
    if (!Connection::is_side_file_refusal(code) || connection.access() == Access::immutable) {
      connection.fail(error);
    }
    connection.reopen(Access::immutable);
    connection.refuse_writes(code == SQLITE_FULL ? SQLITE_FULL : SQLITE_READONLY);
    warn_if_wal_left(connection);
    return connection.retry([&] { return read_identity(connection.db()); });
  }
}

/// Throws the error of SQLite result `code` met while preparing to migrate from `from_version`:
/// for an older schema on storage that cannot be written, the one line that says so.
[[noreturn]] void refuse_upgrade(const Connection& connection, int code, int from_version, const char* message) {
  if (from_version == 0 || (code != SQLITE_READONLY && code != SQLITE_CANTOPEN)) {
    connection.fail_with(code, message);
  }
  throw util::StoreError(fmt::format("{}: written by an older expctl (schema v{}, this one needs v{}) and is on "
                                     "read-only storage: open it once where it is writable to upgrade it",
                                     connection.display(), from_version, k_latest),
                         util::ExitCode::run_failed);
}

/// FULL: a committed run survives a power cut, not only a crash (WAL's NORMAL may lose it).
void use_full_sync(Connection& connection) {
  connection.retry([&] { connection.db().exec("PRAGMA synchronous = FULL"); });
}

/// Throws (refuse_upgrade) unless `connection` can take the write lock.
void require_write_lock(Connection& connection, int from_version) {
  try {
    connection.retry_busy([&] {
      connection.db().exec("BEGIN IMMEDIATE");
      connection.db().exec("ROLLBACK");
    });
  } catch (const SQLite::Exception& error) {
    refuse_upgrade(connection, connection.code_of(error), from_version, error.what());
  }
}

/// Migrates an older (or new, empty) database. A connection opened for reading is reopened
/// read-write for it and stays so; query_only then keeps it from writing.
void upgrade(Connection& connection, int from_version, int target_version) {
  if (connection.refused_code() != 0) {
    refuse_upgrade(connection, connection.refused_code(), from_version, "cannot write the schema");
  }
  if (connection.access() != Access::read_write) {
    connection.reopen(Access::read_write);
    use_full_sync(connection);
  }
  require_write_lock(connection, from_version);
  const bool read_only = connection.read_only();
  connection.set_read_only(false);  // an older database is upgraded in place even for reading
  use_wal(connection);
  apply_migrations(connection, target_version);
  connection.set_read_only(read_only);
}

}  // namespace

int schema_latest() {
  static_assert(k_latest == 9, "add the new migration's test and docs/store.md entry, then bump this");
  return k_latest;
}

int prepare(Connection& connection, int target_version, bool allow_upgrade) {
  EXPCTL_ASSERT(target_version >= 1 && target_version <= k_latest, "schema version {}", target_version);
  // Read first: a file that is not SQLite fails here, before anything could be written to it.
  const Identity identity = read_first(connection);
  check_identity(connection, identity);
  if (connection.read_only() && identity.version == 0) {
    throw util::StoreError(
        fmt::format("{}: empty file, not an expctl database yet: check --db / EXPCTL_DB", connection.display()));
  }
  if (!allow_upgrade && identity.version != 0 && identity.version < target_version) {
    throw util::StoreError(fmt::format("{}: written by an older expctl (schema v{}, this one needs v{}), and this "
                                       "command never writes: upgrade it once with 'expctl --db {} list', then "
                                       "run this again",
                                       connection.display(), identity.version, target_version, connection.display()),
                           util::ExitCode::usage);
  }
  use_full_sync(connection);
  if (identity.version < target_version) {
    upgrade(connection, identity.version, target_version);
  } else if (connection.access() == Access::read_write && !connection.read_only()) {
    use_wal(connection);
  }
  connection.retry([&] { connection.db().exec("PRAGMA foreign_keys = ON"); });
  if (connection.read_only()) {
    connection.retry([&] { connection.db().exec("PRAGMA query_only = ON"); });
  }
  return std::max(identity.version, target_version);
}

}  // namespace expctl::store::detail
