#include "expctl/store/pg_schema.hpp"

#include <iterator>

#include <fmt/format.h>

#include "expctl/store/pg_backend.hpp"
#include "expctl/store/schema_source.hpp"
#include "expctl/util/log.hpp"

namespace expctl::store::detail {

namespace {

struct PgMigration {
  int version;              ///< the schema version this step produces
  const char* description;  ///< why the step exists
  const char* sql;
  /// Run after `sql`, in the same transaction: what SQL alone cannot do (encoding chunks).
  void (*convert)(PgConnection&) = nullptr;
};

/// Forward migrations of an existing database, applied in order. Never edit a shipped step:
/// append a new one, and change schema_source.cpp to the shape it makes (a new database is
/// created from there; test_schema_source.cpp fails until both agree).
/// The shape follows the SQLite schema (schema.cpp) at its v3, with what a shared server needs:
/// metric names are integer keys (metric_keys) so the big table holds 4+4+8+8 bytes of payload a
/// point, not a name; values are float8 and NOT NULL, since NaN and ±Infinity are float8 values;
/// run ids come from the client ("YYYYMMDD-HHMMSS-xxxxxx"), so nodes never collide on a sequence;
/// `COLLATE "C"` orders text byte-wise, as SQLite does, so both backends list in one order.
/// ship_progress and ship_state are the shipper's (ship.hpp): the last step of each series a node
/// has sent, written in the same transaction as the points, and each run's last shipped state.
constexpr PgMigration k_pg_migrations[] = {
    {1, "initial schema (SQLite v3's shape, integer metric keys, float8 values with NaN/Infinity)", R"sql(
CREATE TABLE expctl_schema (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version   integer NOT NULL
);
INSERT INTO expctl_schema (version) VALUES (0);
CREATE TABLE specs (
  hash       text COLLATE "C" PRIMARY KEY,
  name       text NOT NULL,
  canonical  text NOT NULL,
  created_at text NOT NULL
);
CREATE TABLE environments (
  hash        text COLLATE "C" PRIMARY KEY,
  fingerprint text NOT NULL,
  created_at  text NOT NULL
);
CREATE TABLE runs (
  id                text COLLATE "C" PRIMARY KEY,
  spec_hash         text COLLATE "C" NOT NULL REFERENCES specs(hash),
  environment_hash  text COLLATE "C" REFERENCES environments(hash),
  name              text NOT NULL,
  status            text NOT NULL
                    CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost')),
  started_at        text COLLATE "C" NOT NULL,
  ended_at          text,
  exit_code         integer,
  root_cause        text NOT NULL DEFAULT '',
  run_dir           text NOT NULL,
  summary           text NOT NULL DEFAULT '{}',
  owner_host        text,
  owner_pid         bigint,
  owner_boot_id     text,
  owner_start_ticks bigint,
  heartbeat_at      text,
  CHECK ((owner_host IS NULL) = (owner_pid IS NULL) AND (owner_pid IS NULL) = (owner_boot_id IS NULL)
         AND (owner_boot_id IS NULL) = (owner_start_ticks IS NULL))
);
CREATE INDEX runs_by_start ON runs(started_at, id);
CREATE INDEX runs_by_spec ON runs(spec_hash);
CREATE TABLE ranks (
  run_id           text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  rank             integer NOT NULL CHECK (rank >= 0),
  host             text NOT NULL,
  pid              bigint,
  environment_hash text COLLATE "C" REFERENCES environments(hash),
  status           text NOT NULL
                   CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost')),
  exit_code        integer,
  signal           integer,
  PRIMARY KEY (run_id, rank)
);
CREATE TABLE metric_keys (
  id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text COLLATE "C" NOT NULL UNIQUE CHECK (name <> '')
);
CREATE TABLE metrics (
  run_id text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id integer NOT NULL REFERENCES metric_keys(id),
  rank   integer NOT NULL CHECK (rank >= 0),
  step   bigint NOT NULL,
  value  double precision NOT NULL,
  PRIMARY KEY (run_id, key_id, rank, step)
);
CREATE TABLE artifacts (
  run_id     text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  path       text COLLATE "C" NOT NULL CHECK (path <> ''),
  sha256     text NOT NULL CHECK (length(sha256) = 64),
  size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
  PRIMARY KEY (run_id, path)
);
CREATE TABLE tags (
  run_id text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  tag    text COLLATE "C" NOT NULL CHECK (tag <> ''),
  PRIMARY KEY (run_id, tag)
);
CREATE INDEX tags_by_tag ON tags(tag);
CREATE TABLE ship_progress (
  run_id    text COLLATE "C" NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id    integer NOT NULL REFERENCES metric_keys(id),
  rank      integer NOT NULL,
  last_step bigint NOT NULL,
  PRIMARY KEY (run_id, key_id, rank)
);
CREATE TABLE ship_state (
  run_id     text COLLATE "C" PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  digest     text NOT NULL,
  complete   boolean NOT NULL,
  node       text NOT NULL,
  shipped_at text NOT NULL
);
)sql"},
    // A series is read in key order (run, metric, rank, step): with the value in the key's index,
    // that is an index-only scan, already sorted. Without it the planner chose a bitmap scan and
    // sorted 200 000 rows on disk (4 MB work_mem): 360-730 ms against 140-180 ms a series, and
    // compare reads four of them. The index grows by the 8-byte value a point.
    {2, "metrics' primary key carries the value (index-only series reads)", R"sql(
ALTER TABLE metrics DROP CONSTRAINT metrics_pkey,
  ADD CONSTRAINT metrics_pkey PRIMARY KEY (run_id, key_id, rank, step) INCLUDE (value);
)sql"},
    // Each point COPYed into metrics fired two foreign-key triggers (a lookup of its run with a row
    // lock, and of its metric key): COPY of 1 M points took 26 s with them and 8 s without, and
    // they were most of the server's work when 8 ranks ship. The writers now hold the run's row
    // once a transaction (PgBackend::hold_run: FOR KEY SHARE, the lock the trigger took, so a
    // concurrent `rm` still waits for the batch and then deletes its points too), key ids only come
    // from metric_keys, which nothing deletes from, and delete_run deletes the run's metrics itself.
    {3, "metrics without per-row foreign-key checks (the writers hold the run once a batch)", R"sql(
ALTER TABLE metrics DROP CONSTRAINT IF EXISTS metrics_run_id_fkey,
  DROP CONSTRAINT IF EXISTS metrics_key_id_fkey;
)sql"},
    // A shipped run whose final state has not arrived was read as `lost` as soon as its owner
    // process was gone or its heartbeat old (a run that completed while the server was down, on a
    // node that had not shipped it yet). Only the node can tell a dead run from an unshipped one:
    // the server reads a shipped run as `lost` only when the node said so, here.
    // And a series' points written at or below the step already shipped (logged late, logged
    // again, re-logged by a resume) were never shipped: ship_progress.rewrites is how many such
    // writes of the node's (its series_rewrites) the server has; more on the node: sent again.
    {4, "ship_state.lost: the node's word that a shipped run's expctl died; ship_progress.rewrites", R"sql(
ALTER TABLE ship_state ADD COLUMN lost boolean NOT NULL DEFAULT false;
ALTER TABLE ship_progress ADD COLUMN rewrites bigint NOT NULL DEFAULT 0;
)sql"},
    // `run --slurm` records a run at submission, before its job starts it: `queued`, owned by no
    // process (SQLite v7).
    {5, "status queued (a run waiting for its scheduler job)", R"sql(
ALTER TABLE runs DROP CONSTRAINT runs_status_check,
  ADD CONSTRAINT runs_status_check
  CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'diverged', 'lost', 'queued'));
)sql"},
    // A row per point cost 145 bytes a point (the row, its key's index carrying the value) and the
    // shipper's ingest a row each. Series are now what the SQLite store keeps (v8): sealed chunks of
    // up to 4096 points in the bytes chunk_codec.hpp writes, with their headers, and each series'
    // open chunk as points; the shipper sends a node's chunks as they are. Every point of metrics
    // is encoded into sealed chunks (chunk_metrics_rows) and the table dropped, in this step's
    // transaction: a failure leaves the store at v5, whole.
    // STORAGE MAIN (a new database has it from schema_source.cpp): a chunk's bytes are compressed already, so a
    // row that fits its page keeps them in line. The default (EXTENDED) sent every chunk over ~2 KB
    // to TOAST in 2 KB pieces with an index of their own: 4.39 bytes a point for each further
    // quick-start run against 3.82 (bench/store_chunks.sh, docs/store.md). A physical setting that
    // no reader sees, it was added to v6 before any release wrote a v6 server.
    {6, "series as compressed chunks (metric_chunks) and open points (metric_points), metrics converted", R"sql(
CREATE TABLE metric_chunks (
  run_id     text COLLATE "C" NOT NULL,
  key_id     integer NOT NULL,
  rank       integer NOT NULL CHECK (rank >= 0),
  first_step bigint NOT NULL,
  last_step  bigint NOT NULL,
  points     bigint NOT NULL CHECK (points > 0),
  nan_points bigint NOT NULL,
  min_value  double precision,
  max_value  double precision,
  sum_value  double precision,
  first_bits bigint NOT NULL,
  last_bits  bigint NOT NULL,
  data       bytea NOT NULL,
  PRIMARY KEY (run_id, key_id, rank, first_step)
);
ALTER TABLE metric_chunks ALTER COLUMN data SET STORAGE MAIN;
CREATE TABLE metric_points (
  run_id text COLLATE "C" NOT NULL,
  key_id integer NOT NULL,
  rank   integer NOT NULL CHECK (rank >= 0),
  step   bigint NOT NULL,
  bits   bigint NOT NULL,
  PRIMARY KEY (run_id, key_id, rank, step)
);
)sql",
     &chunk_metrics_rows},
};

constexpr int k_pg_latest = static_cast<int>(std::size(k_pg_migrations));

/// Any constant: the advisory lock that serialises schema changes between nodes.
constexpr const char* k_schema_lock = "SELECT pg_advisory_xact_lock(7301946585227550001)";

/// The stored version; 0 for a database without expctl's tables. Refuses a foreign database.
int read_version(PgConnection& connection) {
  const PgResult tables = connection.exec(
      "SELECT to_regclass('expctl_schema') IS NOT NULL, to_regclass('runs') IS NOT NULL");
  const bool versioned = tables.text(0, 0) == "t";
  if (!versioned) {
    if (tables.text(0, 1) == "t") {
      throw Error(fmt::format("{}: has a \"runs\" table but is not an expctl store: use another database for --db",
                              connection.display()),
                  FailureKind::corrupt, util::ExitCode::usage);
    }
    return 0;
  }
  return static_cast<int>(connection.exec("SELECT version FROM expctl_schema").int64(0, 0));
}

void refuse_newer(const PgConnection& connection, int version) {
  if (version > k_pg_latest) {
    throw Error(fmt::format("{}: written by a newer expctl (schema v{}, this one reads up to v{}): upgrade expctl",
                            connection.display(), version, k_pg_latest),
                FailureKind::input, util::ExitCode::usage);
  }
}

}  // namespace

int pg_schema_latest() {
  return k_pg_latest;
}

int pg_prepare(PgConnection& connection, int target_version, bool may_write) {
  EXPCTL_ASSERT(target_version >= 1 && target_version <= k_pg_latest, "schema version {}", target_version);
  const int found = read_version(connection);
  refuse_newer(connection, found);
  if (found >= target_version) {
    return found;
  }
  if (!may_write) {
    if (found == 0) {
      throw NoStoreYet(
          fmt::format("{}: holds no expctl store yet: 'expctl run' records the first run there (or "
                      "'expctl sync' ships this node's runs), which makes it",
                      connection.display()));
    }
    throw Error(fmt::format("{}: written by an older expctl (schema v{}, this expctl needs v{}): open it once for "
                            "writing, e.g. with 'expctl sync', to upgrade it",
                            connection.display(), found, target_version),
                FailureKind::input, util::ExitCode::usage);
  }
  return connection.transaction([&] {
    connection.exec(k_schema_lock);
    const int version = read_version(connection);  // again, under the lock: another node may have migrated
    refuse_newer(connection, version);
    if (version == 0 && target_version == k_pg_latest) {
      // A new database is made from the one schema source; the steps below carry older ones.
      connection.run_script(create_schema_sql(Dialect::postgres) + "INSERT INTO expctl_schema (version) VALUES (0);");
      util::log::debug(fmt::format("store: created {} at schema v{}", connection.display(), target_version));
    } else {
      for (const PgMigration& step : k_pg_migrations) {
        if (step.version > version && step.version <= target_version) {
          connection.run_script(step.sql);
          if (step.convert != nullptr) {
            step.convert(connection);
          }
          util::log::debug(fmt::format("store: migrated {} to schema v{} ({})", connection.display(), step.version,
                                       step.description));
        }
      }
    }
    if (target_version > version) {
      connection.exec("UPDATE expctl_schema SET version = $1", {std::to_string(target_version)});
    }
    return std::max(version, target_version);
  });
}

}  // namespace expctl::store::detail
