#include "expctl/store/schema.hpp"

#include <iterator>

#include "expctl/util/log.hpp"

namespace expctl::store::detail {

namespace {

/// PRAGMA application_id of expctl databases ("expc"): tells our files from other SQLite files.
constexpr int k_application_id = 0x65787063;

struct Migration {
  int version;              ///< the schema version this step produces
  const char* description;  ///< why the step exists
  const char* sql;
};

/// Forward migrations, applied in order. Never edit a shipped step: append a new one.
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

void apply_migrations(Connection& connection, int target_version) {
  connection.write([&](SQLite::Database& db) {
    // Read again under the write lock: another process may have migrated meanwhile.
    const Identity identity = read_identity(db);
    check_identity(connection, identity);
    for (const Migration& step : k_migrations) {
      if (step.version > identity.version && step.version <= target_version) {
        db.exec(step.sql);
        util::log::debug(
            fmt::format("store: migrated {} to schema v{} ({})", connection.display(), step.version, step.description));
      }
    }
    if (target_version > identity.version) {
      // PRAGMAs take no bound parameters; both values are our own integers, never user input.
      db.exec(fmt::format("PRAGMA application_id = {}", k_application_id));
      db.exec(fmt::format("PRAGMA user_version = {}", target_version));
    }
  });
}

void use_wal(Connection& connection) {
  const std::string mode =
      connection.retry([&] { return connection.db().execAndGet("PRAGMA journal_mode = WAL").getString(); });
  if (mode != "wal") {
    util::log::warn(fmt::format("{}: cannot use WAL journaling here (got \"{}\"); concurrent writers will wait longer",
                                connection.display(), mode));
  }
}

}  // namespace

int schema_latest() {
  static_assert(k_latest == 2, "add the new migration's test and docs/store.md entry, then bump this");
  return k_latest;
}

int prepare(Connection& connection, int target_version) {
  EXPCTL_ASSERT(target_version >= 1 && target_version <= k_latest, "schema version {}", target_version);
  // Read first: a file that is not SQLite fails here, before anything could be written to it.
  const Identity identity = connection.retry([&] { return read_identity(connection.db()); });
  check_identity(connection, identity);
  if (connection.read_only() && identity.version == 0) {
    throw util::StoreError(
        fmt::format("{}: empty file, not an expctl database yet: check --db / EXPCTL_DB", connection.display()));
  }
  if (!connection.read_only()) {
    use_wal(connection);
  }
  connection.retry([&] {
    connection.db().exec("PRAGMA foreign_keys = ON");
    // FULL: a committed run survives a power cut, not only a crash (WAL's NORMAL may lose it).
    connection.db().exec("PRAGMA synchronous = FULL");
  });
  if (identity.version < target_version) {
    const bool read_only = connection.read_only();
    connection.set_read_only(false);  // an older database is upgraded in place even for reading
    apply_migrations(connection, target_version);
    connection.set_read_only(read_only);
  }
  if (connection.read_only()) {
    connection.retry([&] { connection.db().exec("PRAGMA query_only = ON"); });
  }
  return std::max(identity.version, target_version);
}

}  // namespace expctl::store::detail
