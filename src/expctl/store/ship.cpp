// The shipper (ship.hpp): node-local SQLite rows into a PostgreSQL store, idempotently.
#include "expctl/store/ship.hpp"

#include <future>
#include <limits>
#include <map>
#include <utility>

#include <poll.h>

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include "expctl/store/pg_backend.hpp"
#include "expctl/store/sqlite_backend.hpp"
#include "expctl/store/sqlite_chunks.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/interrupt_signals.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::store {

namespace {

using detail::Connection;
using detail::PgConnection;
using detail::PgParams;
using detail::PgResult;

/// The run columns both schemas share, in one order.
constexpr const char* k_run_columns =
    "id, spec_hash, environment_hash, name, status, started_at, ended_at, exit_code, root_cause, run_dir, summary, "
    "owner_host, owner_pid, owner_boot_id, owner_start_ticks, heartbeat_at";
constexpr int k_run_column_count = 16;

constexpr const char* k_staging =
    "CREATE TEMP TABLE IF NOT EXISTS expctl_ship_staging_v2 "
    "(run_id text, key_id integer, rank integer, step bigint, value double precision) ON COMMIT DELETE ROWS";

struct LocalRun {
  PgParams columns;  ///< k_run_columns as text
  std::string tags;  ///< comma-separated, sorted
  std::string digest;
  /// Stored `running`, and its owner is gone: lost, as this node (the one that can tell) reads it.
  bool lost = false;

  const std::string& id() const { return *columns[0]; }
  /// Its final state is known: it ended, or this node found its expctl gone.
  bool ended() const { return columns[4] != "running" || lost; }
};

/// Whether a run stored `running` in the node's store is lost, as derive_run_status reads it
/// from the owner columns (k_run_columns 11-15).
bool lost_on_node(const PgParams& columns) {
  if (columns[4] != "running" || !columns[11] || !columns[12] || !columns[13] || !columns[14]) {
    return false;
  }
  const util::ProcessIdentity owner{*columns[11], std::stoll(*columns[12]), *columns[13], std::stoll(*columns[14])};
  const auto heartbeat = columns[15] ? parse_utc(*columns[15]) : std::nullopt;
  return derive_run_status(RunStatus::running, owner, heartbeat, Clock::now()) == RunStatus::lost;
}

/// What a run's row refers to and what hangs off it, read from the node's store with the row.
struct RunRows {
  std::vector<PgParams> spec;
  std::vector<PgParams> environments;
  std::vector<PgParams> ranks;
  std::vector<PgParams> artifacts;
};

struct ShipState {
  std::string digest;
  bool complete = false;
};

struct Series {
  std::string name;
  std::int64_t local_key = 0;  ///< its metric_keys.id in the local store
  int rank = 0;
};

std::optional<std::string> text_of(const SQLite::Column& column) {
  return column.isNull() ? std::nullopt : std::optional(column.getString());
}

std::vector<LocalRun> local_runs(Connection& local, const std::optional<std::string>& only) {
  return local.retry([&] {
    SQLite::Statement query(
        local.db(), fmt::format("SELECT {}, (SELECT group_concat(tag, ',') FROM (SELECT tag FROM tags t WHERE "
                                "t.run_id = runs.id ORDER BY tag)) FROM runs WHERE ?1 IS NULL OR id = ?1 ORDER BY id",
                                k_run_columns));
    if (only) {
      query.bind(1, *only);
    }
    std::vector<LocalRun> runs;
    while (query.executeStep()) {
      LocalRun run;
      std::string material;
      for (int column = 0; column < k_run_column_count; ++column) {
        run.columns.push_back(text_of(query.getColumn(column)));
        material += run.columns.back() ? *run.columns.back() + "\x1f" : "\x1e\x1f";
      }
      if (!is_run_id(run.id())) {
        // Never shipped: a server's readers would take it for a folder name. One line a pass.
        util::log::warn(invalid_run_id_text(run.id(), local.display()) + "; it is not shipped");
        continue;
      }
      run.tags = text_of(query.getColumn(k_run_column_count)).value_or("");
      run.lost = lost_on_node(run.columns);
      run.digest = util::sha256_hex(material + run.tags + (run.lost ? "\x1flost" : ""));
      runs.push_back(std::move(run));
    }
    return runs;
  });
}

std::map<std::string, ShipState> server_states(PgConnection& server) {
  const PgResult rows = server.exec("SELECT run_id, digest, complete FROM ship_state");
  std::map<std::string, ShipState> states;
  for (int row = 0; row < rows.rows(); ++row) {
    states[rows.text(row, 0)] = ShipState{rows.text(row, 1), rows.text(row, 2) == "t"};
  }
  return states;
}

bool shipped_whole(const LocalRun& run, const std::map<std::string, ShipState>& states) {
  const auto found = states.find(run.id());
  return found != states.end() && found->second.complete && found->second.digest == run.digest;
}

/// Rows of `sql` (one bound run id) as text columns.
std::vector<PgParams> local_rows(Connection& local, const char* sql, const std::string& run_id, int columns) {
  return local.retry([&] {
    SQLite::Statement query(local.db(), sql);
    query.bind(1, run_id);
    std::vector<PgParams> rows;
    while (query.executeStep()) {
      PgParams row;
      for (int column = 0; column < columns; ++column) {
        row.push_back(text_of(query.getColumn(column)));
      }
      rows.push_back(std::move(row));
    }
    return rows;
  });
}

/// The spec and environments a run refers to, its ranks and artifacts, as the node holds them.
RunRows read_run_rows(Connection& local, const LocalRun& run) {
  RunRows rows;
  rows.spec =
      local_rows(local, "SELECT hash, name, canonical, created_at FROM specs WHERE hash = ?", *run.columns[1], 4);
  rows.ranks = local_rows(
      local, "SELECT run_id, rank, host, pid, environment_hash, status, exit_code, signal FROM ranks WHERE run_id = ?",
      run.id(), 8);
  rows.artifacts =
      local_rows(local, "SELECT run_id, path, sha256, size_bytes FROM artifacts WHERE run_id = ?", run.id(), 4);
  std::vector<std::string> hashes;
  if (run.columns[2]) {
    hashes.push_back(*run.columns[2]);
  }
  for (const auto& rank : rows.ranks) {
    if (rank[4]) {
      hashes.push_back(*rank[4]);
    }
  }
  for (const auto& hash : hashes) {
    for (auto& row : local_rows(local, "SELECT hash, fingerprint, created_at FROM environments WHERE hash = ?", hash, 3)) {
      rows.environments.push_back(std::move(row));
    }
  }
  return rows;
}

/// The run row's INSERT (k_run_columns), followed by `on_conflict`.
std::string run_insert(std::string_view on_conflict) {
  return fmt::format(
      "INSERT INTO runs ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, "
      "$16) ON CONFLICT (id) {}",
      k_run_columns, on_conflict);
}

/// Before any point: the spec and environments, and the run's row where the server has none yet
/// — as a run still going (no end, no summary). Its final state comes with its last points
/// (write_run_state), so no reader of the server ever sees a run ended with points missing.
/// Adds the specs and environments the server did not have to `report` once committed.
void ship_run_as_going(PgConnection& server, const LocalRun& run, const RunRows& rows, ShipReport& report) {
  PgParams going = run.columns;
  going[4] = "running";
  going[6] = std::nullopt;  // ended_at
  going[7] = std::nullopt;  // exit_code
  going[8] = "";            // root_cause
  going[10] = "{}";         // summary
  const auto [specs, environments] = server.transaction([&] {
    std::int64_t specs_added = 0;
    std::int64_t environments_added = 0;
    for (const auto& row : rows.spec) {
      specs_added += server
                         .exec(
                             "INSERT INTO specs (hash, name, canonical, created_at) VALUES ($1, $2, $3, $4) "
                             "ON CONFLICT (hash) DO NOTHING",
                             row)
                         .changed();
    }
    for (const auto& row : rows.environments) {
      environments_added += server
                                .exec(
                                    "INSERT INTO environments (hash, fingerprint, created_at) VALUES ($1, $2, $3) "
                                    "ON CONFLICT (hash) DO NOTHING",
                                    row)
                                .changed();
    }
    server.exec(run_insert("DO NOTHING"), going);
    return std::pair(specs_added, environments_added);
  });
  report.specs_added += specs;
  report.environments_added += environments;
}

/// Inside the transaction of a run's last batch: the run row as the node holds it, its ranks,
/// artifacts and tags, and the ship state (complete when the pass read the run ended or lost).
/// Returns the tags the server did not have.
std::int64_t write_run_state(PgConnection& server, const LocalRun& run, const RunRows& rows) {
  std::int64_t tags_added = 0;
  server.exec(run_insert("DO UPDATE SET name = excluded.name, status = excluded.status, ended_at = excluded.ended_at, "
                         "exit_code = excluded.exit_code, root_cause = excluded.root_cause, summary = "
                         "excluded.summary, owner_host = excluded.owner_host, owner_pid = excluded.owner_pid, "
                         "owner_boot_id = excluded.owner_boot_id, owner_start_ticks = excluded.owner_start_ticks, "
                         "heartbeat_at = excluded.heartbeat_at"),
              run.columns);
  for (const auto& row : rows.ranks) {
    server.exec(
        "INSERT INTO ranks (run_id, rank, host, pid, environment_hash, status, exit_code, signal) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (run_id, rank) DO UPDATE SET host = "
        "excluded.host, pid = excluded.pid, environment_hash = excluded.environment_hash, status = "
        "excluded.status, exit_code = excluded.exit_code, signal = excluded.signal",
        row);
  }
  // Artifacts mirror the node's (a pruned checkpoint is forgotten there); tags add up, as in merge.
  server.exec("DELETE FROM artifacts WHERE run_id = $1", {run.id()});
  for (const auto& row : rows.artifacts) {
    server.exec("INSERT INTO artifacts (run_id, path, sha256, size_bytes) VALUES ($1, $2, $3, $4)", row);
  }
  if (!run.tags.empty()) {
    tags_added = server
                     .exec(
                         "INSERT INTO tags (run_id, tag) SELECT $1, unnest(string_to_array($2, ',')) "
                         "ON CONFLICT (run_id, tag) DO NOTHING",
                         {run.id(), run.tags})
                     .changed();
  }
  server.exec(
      "INSERT INTO ship_state (run_id, digest, complete, node, shipped_at, lost) VALUES ($1, $2, $3, $4, $5, "
      "$6) ON CONFLICT (run_id) DO UPDATE SET digest = excluded.digest, complete = excluded.complete, "
      "node = excluded.node, shipped_at = excluded.shipped_at, lost = excluded.lost",
      {run.id(), run.digest, run.ended() ? "true" : "false", util::ProcessIdentity::current().host,
       format_utc(Clock::now()), run.lost ? "true" : "false"});
  return tags_added;
}

/// Every (key, rank) series of a run, from its chunks' index and its open points (a few
/// thousand rows a series at most, whatever the run's length).
std::vector<Series> local_series(Connection& local, const std::string& run_id) {
  return local.retry([&] {
    SQLite::Statement name(local.db(), "SELECT name FROM metric_keys WHERE id = ?");
    std::vector<Series> series;
    for (const detail::SeriesKeyRank& one : detail::run_series(local.db(), run_id)) {
      if (series.empty() || series.back().local_key != one.key) {
        name.reset();
        name.bind(1, static_cast<int64_t>(one.key));
        name.executeStep();
        series.push_back(Series{name.getColumn(0).getString(), one.key, one.rank});
      } else {
        series.push_back(Series{series.back().name, one.key, one.rank});
      }
    }
    return series;
  });
}

/// How far a series is on the server: the last step shipped, and how many of the node's rewrites
/// (series_rewrites) it has been sent again for.
struct Progress {
  std::int64_t last_step = 0;
  std::int64_t rewrites = 0;
};
using SeriesKey = std::pair<std::string, int>;  ///< (metric name, rank)

/// The progress of each (name, rank) series of a run on the server.
std::map<SeriesKey, Progress> server_progress(PgConnection& server, const std::string& run_id) {
  const PgResult rows = server.exec(
      "SELECT k.name, p.rank, p.last_step, p.rewrites FROM ship_progress p JOIN metric_keys k ON k.id = p.key_id "
      "WHERE p.run_id = $1",
      {run_id});
  std::map<SeriesKey, Progress> progress;
  for (int row = 0; row < rows.rows(); ++row) {
    progress[{rows.text(row, 0), static_cast<int>(rows.int64(row, 1))}] = {rows.int64(row, 2), rows.int64(row, 3)};
  }
  return progress;
}

/// The node's rewrite counts of a run's series (series_rewrites; few rows, most runs none). Read
/// before the points: a rewrite after this read is counted higher, and sent by a later pass.
std::map<SeriesKey, std::int64_t> local_rewrites(Connection& local, const std::string& run_id) {
  return local.retry([&] {
    SQLite::Statement query(local.db(),
                            "SELECT k.name, r.rank, r.rewrites FROM series_rewrites r JOIN metric_keys k ON "
                            "k.id = r.key_id WHERE r.run_id = ?");
    query.bind(1, run_id);
    std::map<SeriesKey, std::int64_t> rewrites;
    while (query.executeStep()) {
      rewrites[{query.getColumn(0).getString(), query.getColumn(1).getInt()}] = query.getColumn(2).getInt64();
    }
    return rewrites;
  });
}

/// The node's rewrite count of a series when the server has its points up to some step but has
/// not been sent that many rewrites again (the series' shipped steps must go again); nullopt
/// otherwise (nothing shipped yet: everything goes anyway; or nothing rewritten since).
std::optional<std::int64_t> rewrites_to_resend(const std::map<SeriesKey, Progress>& progress,
                                               const std::map<SeriesKey, std::int64_t>& rewrites,
                                               const SeriesKey& series) {
  const auto found = progress.find(series);
  const auto rewritten = rewrites.find(series);
  if (found == progress.end() || rewritten == rewrites.end() || rewritten->second <= found->second.rewrites) {
    return std::nullopt;
  }
  return rewritten->second;
}

/// One batch of points as COPY text, and the last step of each series it holds.
struct Batch {
  std::string copy;
  std::size_t points = 0;
  /// (key id, rank) -> last step in the batch, and the node's rewrites the server then has
  std::map<std::pair<int, int>, Progress> progress;
};

/// A series of the run and how far its points have been read.
struct Cursor {
  Series series;
  int key = 0;  ///< its metric_keys.id on the server
  std::int64_t after = 0;
  /// The node has rewritten points at or below `after` that the server has not been sent again:
  /// the node's count, which the server's progress takes once they are.
  std::optional<std::int64_t> resend{};
  /// The node's rewrites when the pass began; a series new to the server gets them all with its
  /// points, so this is what its progress records (0 for a series the server had).
  std::int64_t rewrites_sent = 0;
};

class PointShipper {
 public:
  PointShipper(Connection& local, PgBackend& server, const LocalRun& run, const RunRows& rows,
               const ShipOptions& options, ShipReport& report)
      : m_local(local),
        m_server(server),
        m_run(run),
        m_rows(rows),
        m_batch_points(std::max<std::size_t>(1, options.batch_points)),
        m_deadline(options.deadline),
        m_cancel(options.cancel),
        m_report(report) {}

  /// The deadline passed, or the shipper was stopped: no further batch.
  bool stopping() const {
    return (m_deadline && std::chrono::steady_clock::now() >= *m_deadline) || (m_cancel && m_cancel->load());
  }

  /// Sends every point past the shipped step of each series; the last batch also carries the
  /// run's row as the node holds it and its ship_state (write_run_state). The next batch is read
  /// from the local store while the server takes the one before, instead of each waiting for the
  /// other (shipping a finished 4.16 M-point store: 0.90x the time). Returns false when the
  /// deadline passed first: what was committed stays, the run's state waits for the next pass.
  bool run() {
    const auto progress = server_progress(m_server.connection(), m_run.id());
    const auto rewrites = local_rewrites(m_local, m_run.id());
    for (const Series& series : local_series(m_local, m_run.id())) {
      const auto found = progress.find({series.name, series.rank});
      const int key = m_server.key_id(series.name);  // outside any transaction: see PgBackend::key_id
      Cursor cursor{series, key,
                    found == progress.end() ? std::numeric_limits<std::int64_t>::min() : found->second.last_step};
      cursor.resend = rewrites_to_resend(progress, rewrites, {series.name, series.rank});
      const auto rewritten = rewrites.find({series.name, series.rank});
      if (found == progress.end() && rewritten != rewrites.end()) {
        cursor.rewrites_sent = rewritten->second;
      }
      m_cursors.push_back(std::move(cursor));
    }
    for (const Cursor& cursor : m_cursors) {
      if (cursor.resend) {
        resend(cursor);
      }
    }
    Batch batch = read_batch();
    while (true) {
      const bool full = batch.points >= m_batch_points;  // there may be more
      std::future<Batch> ahead;
      if (full) {
        ahead = std::async(std::launch::async, [this] { return read_batch(); });  // joined on any exit
      }
      flush(batch, !full);
      if (!full) {
        return true;
      }
      batch = ahead.get();
      if (stopping()) {
        return false;
      }
    }
  }

 private:
  /// Up to batch_points points past the cursors, series after series.
  Batch read_batch() {
    Batch batch;
    for (; m_next < m_cursors.size(); ++m_next) {
      Cursor& cursor = m_cursors[m_next];
      while (batch.points < m_batch_points) {
        const auto [rows, last] = read_chunk(cursor, batch);
        if (rows == 0) {
          break;
        }
        batch.progress[{cursor.key, cursor.series.rank}] = {last, cursor.rewrites_sent};
        cursor.after = last;
      }
      if (batch.points >= m_batch_points) {
        break;  // this series may have more: the next batch starts at it
      }
    }
    return batch;
  }

  /// Sends a series' points at or below its shipped step again, the node's values replacing the
  /// server's, in batches; the last one records that the server has the node's rewrites up to
  /// `cursor.resend`. A pass killed midway sends them again next time (the same rows, the same
  /// values). Rare: only a series written at or below a step it had shipped.
  void resend(const Cursor& cursor) {
    Cursor again = cursor;
    again.after = std::numeric_limits<std::int64_t>::min();
    while (true) {
      Batch batch;
      // Not a structured binding: the transaction's lambda uses `rows`, and clang 14 (the fuzz
      // preset) refuses to capture one.
      const std::pair<std::size_t, std::int64_t> chunk = read_chunk(again, batch, cursor.after);
      const std::size_t rows = chunk.first;
      again.after = chunk.second;
      const bool done = rows < m_batch_points;
      PgConnection& server = m_server.connection();
      server.transaction([&] {
        m_server.hold_run(m_run.id());
        if (rows > 0) {
          server.exec(k_staging);
          server.copy_in("COPY expctl_ship_staging_v2 (run_id, key_id, rank, step, value) FROM STDIN", batch.copy);
          server.exec(
              "INSERT INTO metrics (run_id, key_id, rank, step, value) SELECT run_id, key_id, rank, step, "
              "value FROM expctl_ship_staging_v2 ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET "
              "value = excluded.value");
        }
        if (done) {
          server.exec(
              "UPDATE ship_progress SET rewrites = greatest(rewrites, $4) WHERE run_id = $1 AND key_id = $2 "
              "AND rank = $3",
              {m_run.id(), std::to_string(cursor.key), std::to_string(cursor.series.rank),
               std::to_string(*cursor.resend)});
        }
      });
      m_report.points_shipped += static_cast<std::int64_t>(rows);
      m_report.batches += rows > 0 ? 1 : 0;
      if (done) {
        return;
      }
    }
  }

  /// Appends up to the batch's room of a series' points past its cursor (and at most `upto`) to
  /// the batch.
  std::pair<std::size_t, std::int64_t> read_chunk(const Cursor& cursor, Batch& batch,
                                                  std::int64_t upto = std::numeric_limits<std::int64_t>::max()) {
    const std::size_t room = m_batch_points - batch.points;
    return m_local.retry([&] {
      const auto read = detail::read_series(m_local.db(), m_run.id(), cursor.series.local_key, cursor.series.rank,
                                            cursor.after, upto, room);
      std::size_t rows = 0;
      std::int64_t last = cursor.after;
      const std::size_t mark = batch.copy.size();
      for (const SeriesColumns& rank : read) {
        for (std::size_t i = 0; i < rank.steps.size(); ++i) {
          last = rank.steps[i];
          batch.copy += fmt::format("{}\t{}\t{}\t{}\t{}\n", m_run.id(), cursor.key, cursor.series.rank, last,
                                    PgConnection::real_text(rank.values[i]));
          ++rows;
        }
      }
      if (rows == 0) {
        batch.copy.resize(mark);  // a retry after SQLITE_BUSY starts the chunk again
      }
      batch.points += rows;
      return std::pair(rows, last);
    });
  }

  /// The batch into metrics. Points past each series' shipped step are new to the server, so COPY
  /// goes straight into the table (no conflict check per row: about twice the rate). Where some
  /// are there already (another node shipped a copy of the run meanwhile, or a run re-logged a
  /// step) the COPY fails whole; it is rolled back to the savepoint and the batch goes through a
  /// staging table and `INSERT ... ON CONFLICT DO NOTHING` instead, which keeps the first value.
  static void copy_points(PgConnection& server, const std::string& copy) {
    server.exec("SAVEPOINT expctl_direct");
    try {
      server.copy_in("COPY metrics (run_id, key_id, rank, step, value) FROM STDIN", copy);
      server.exec("RELEASE SAVEPOINT expctl_direct");
      return;
    } catch (const Error& error) {
      if (error.kind() == FailureKind::unreachable) {
        throw;
      }
      server.exec("ROLLBACK TO SAVEPOINT expctl_direct");  // throws where the connection is gone
    }
    server.exec(k_staging);
    server.copy_in("COPY expctl_ship_staging_v2 (run_id, key_id, rank, step, value) FROM STDIN", copy);
    server.exec("INSERT INTO metrics (run_id, key_id, rank, step, value) SELECT run_id, key_id, rank, step, value "
                "FROM expctl_ship_staging_v2 ON CONFLICT (run_id, key_id, rank, step) DO NOTHING");
  }

  void flush(const Batch& batch, bool last) {
    if (batch.points == 0 && !last) {
      return;
    }
    PgConnection& server = m_server.connection();
    std::int64_t tags_added = 0;
    server.transaction([&] {
      tags_added = 0;  // a transaction tried again counts afresh
      if (batch.points > 0) {
        m_server.hold_run(m_run.id());
        copy_points(server, batch.copy);
        for (const auto& [series, shipped] : batch.progress) {
          server.exec(
              "INSERT INTO ship_progress (run_id, key_id, rank, last_step, rewrites) VALUES ($1, $2, $3, $4, "
              "$5) ON CONFLICT (run_id, key_id, rank) DO UPDATE SET last_step = "
              "greatest(ship_progress.last_step, excluded.last_step), rewrites = "
              "greatest(ship_progress.rewrites, excluded.rewrites)",
              {m_run.id(), std::to_string(series.first), std::to_string(series.second),
               std::to_string(shipped.last_step), std::to_string(shipped.rewrites)});
        }
      }
      if (last) {
        tags_added = write_run_state(server, m_run, m_rows);
      }
    });
    m_report.tags_added += tags_added;
    if (batch.points > 0) {
      m_report.points_shipped += static_cast<std::int64_t>(batch.points);
      m_report.batches += 1;
    }
  }

  Connection& m_local;  ///< read by one thread at a time: the reader of the next batch, or run()
  PgBackend& m_server;
  const LocalRun& m_run;
  const RunRows& m_rows;
  const std::size_t m_batch_points;
  const std::optional<std::chrono::steady_clock::time_point> m_deadline;
  const std::atomic<bool>* m_cancel;
  ShipReport& m_report;
  std::vector<Cursor> m_cursors;
  std::size_t m_next = 0;  ///< the first cursor that may have points left
};

/// A metrics table the server has never analysed (a new team server's first ship) is analysed
/// once: without statistics the planner guesses a few dozen rows per series and reads a 200 000
/// point series by bitmap scan and an on-disk sort, not in index order (compare of two 100 000-step
/// runs: 0.93 s instead of 0.6 s) until autovacuum gets to it. ANALYZE samples a fixed number of
/// rows, so it costs about the same for any table size; a role that does not own the table gets a
/// warning from the server, not an error.
void analyze_if_never_analyzed(PgConnection& server) {
  const PgResult never = server.exec(
      "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables "
      "WHERE relid = 'metrics'::regclass");
  if (never.rows() == 1 && never.text(0, 0) == "t") {
    server.exec("ANALYZE metrics");
  }
}

}  // namespace

ShipReport ship(Store& local, Store& server, const ShipOptions& options) {
  Connection& source = detail::sqlite_backend(local, "shipping").connection();
  PgBackend& destination = detail::pg_backend(server, "shipping");
  ShipReport report;
  const auto states = server_states(destination.connection());
  for (const LocalRun& run : local_runs(source, options.run_id)) {
    ++report.runs_considered;
    if (shipped_whole(run, states)) {
      report.complete.insert(run.id() + ' ' + run.digest);
      report.whole.push_back(run.id());
      continue;
    }
    if ((options.deadline && std::chrono::steady_clock::now() >= *options.deadline) ||
        (options.cancel && options.cancel->load())) {
      continue;  // counted, not shipped: the next pass takes it (ship_lag says so)
    }
    const RunRows rows = read_run_rows(source, run);
    ship_run_as_going(destination.connection(), run, rows, report);
    if (!PointShipper(source, destination, run, rows, options, report).run()) {
      continue;  // the deadline came between two batches
    }
    ++report.runs_shipped;
    report.shipped.push_back(run.id());
    if (run.ended()) {
      report.complete.insert(run.id() + ' ' + run.digest);
    }
  }
  if (report.points_shipped > 0) {
    analyze_if_never_analyzed(destination.connection());
  }
  return report;
}

MergeResult merge_by_shipping(Store& server, const std::filesystem::path& source) {
  std::error_code error;
  EXPCTL_CHECK(std::filesystem::exists(source, error), util::StoreError, "{}: no such database: check the path",
               source.string());
  Store from = Store::open(source.string(), OpenMode::read_only);
  const ShipReport report = ship(from, server);
  MergeResult result;
  result.source = source;
  result.added = report.shipped;
  result.present = report.whole;
  result.specs_added = report.specs_added;
  result.environments_added = report.environments_added;
  result.tags_added = report.tags_added;
  result.points_added = report.points_shipped;
  return result;
}

ShipLag ship_lag(Store& local, Store& server, const std::optional<std::string>& run_id) {
  Connection& source = detail::sqlite_backend(local, "the shipping lag").connection();
  PgConnection& destination = detail::pg_backend(server, "the shipping lag").connection();
  ShipLag lag;
  const auto states = server_states(destination);
  for (const LocalRun& run : local_runs(source, run_id)) {
    ++lag.runs_local;
    if (shipped_whole(run, states)) {
      continue;
    }
    ++lag.runs_behind;
    const auto progress = server_progress(destination, run.id());
    const auto rewrites = local_rewrites(source, run.id());
    for (const Series& series : local_series(source, run.id())) {
      const auto found = progress.find({series.name, series.rank});
      // A series whose shipped steps go again counts whole (an upper bound).
      const std::int64_t after = found == progress.end() || rewrites_to_resend(progress, rewrites, found->first)
                                     ? std::numeric_limits<std::int64_t>::min()
                                     : found->second.last_step;
      lag.points_behind += source.retry([&] {
        return detail::count_points(source.db(), run.id(), detail::SeriesKeyRank{series.local_key, series.rank}, after);
      });
    }
  }
  return lag;
}

std::optional<ShippedRun> shipped_run(Store& server, const std::string& run_id) {
  PgConnection& connection = detail::pg_backend(server, "a run's shipping state").connection();
  const PgResult rows =
      connection.exec("SELECT node, shipped_at, complete, lost FROM ship_state WHERE run_id = $1", {run_id});
  if (rows.rows() == 0) {
    return std::nullopt;
  }
  return ShippedRun{rows.text(0, 0), rows.text(0, 1), rows.text(0, 2) == "t", rows.text(0, 3) == "t"};
}

BackgroundShipper::BackgroundShipper(std::string local, std::string server, Note note,
                                     std::chrono::milliseconds interval, std::chrono::milliseconds final_wait)
    : m_local(std::move(local)),
      m_server(std::move(server)),
      m_note(std::move(note)),
      m_interval(interval),
      m_final_wait(final_wait),
      m_started(Clock::now()) {
  m_thread = std::thread([this] { loop(); });
}

BackgroundShipper::BackgroundShipper(Foreground, std::string local, std::string server, PassNote on_pass,
                                     std::chrono::milliseconds interval)
    : m_local(std::move(local)),
      m_server(std::move(server)),
      m_on_pass(std::move(on_pass)),
      m_interval(interval),
      m_started(Clock::now()),
      m_foreground(true) {}

BackgroundShipper::~BackgroundShipper() {
  if (m_foreground) {
    stop();  // follow() has returned (or never ran): nothing to finish
    return;
  }
  try {
    (void)finish();
  } catch (const std::exception& error) {
    util::log::debug(fmt::format("shipper: the last pass failed: {}", error.what()));
  }
}

BackgroundShipper::Leftover BackgroundShipper::finish() {
  if (m_leftover) {
    return *m_leftover;
  }
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) {
    m_thread.join();
  }
  m_leftover = leftover();
  return *m_leftover;
}

BackgroundShipper::Leftover BackgroundShipper::leftover() {
  Leftover left;
  if (!m_local_store) {
    return left;  // no store, no run: nothing to ship
  }
  left.problem = problem();
  if (!left.problem && m_server_store) {
    try {
      const ShipLag lag = ship_lag(*m_local_store, *m_server_store);
      left.runs_behind = lag.runs_behind;
      left.points_behind = lag.points_behind;
      return left;
    } catch (const std::exception& error) {
      left.problem = error.what();
    }
  }
  // The server is away: the points of the runs that changed while this shipper lived (the run
  // it ships for) and whose final state no pass sent; older runs are not this exit's to count.
  left.exact = false;
  Connection& source = detail::sqlite_backend(*m_local_store, "the shipping lag").connection();
  const std::string since = format_utc(m_started);
  for (const LocalRun& run : local_runs(source, std::nullopt)) {
    const auto changed_since = [&](int column) { return run.columns[column] && *run.columns[column] >= since; };
    const bool changed = changed_since(5) || changed_since(6) || changed_since(15);
    if (changed && !m_complete.contains(run.id() + ' ' + run.digest)) {
      ++left.runs_behind;
      left.points_behind += source.retry([&] { return detail::count_points(source.db(), run.id(), std::nullopt); });
    }
  }
  return left;
}

ShipReport BackgroundShipper::totals() const {
  std::lock_guard lock(m_mutex);
  return m_totals;
}

std::optional<std::string> BackgroundShipper::problem() const {
  std::lock_guard lock(m_mutex);
  return m_problem;
}

std::int64_t BackgroundShipper::failed_passes() const {
  std::lock_guard lock(m_mutex);
  return m_failed_passes;
}

bool BackgroundShipper::pass(std::optional<std::chrono::steady_clock::time_point> deadline) {
  try {
    if (!m_local_store) {
      std::error_code ec;
      if (!std::filesystem::exists(parse_store_location(m_local).target, ec)) {
        return true;  // the run has not created its local store yet
      }
      m_local_store.emplace(Store::open(m_local, OpenMode::read_only));
    }
    if (!m_server_store) {
      m_server_store.emplace(Store::open(m_server, OpenMode::read_write));
    }
    const ShipReport report =
        ship(*m_local_store, *m_server_store, ShipOptions{.deadline = deadline, .cancel = &m_cancel});
    std::optional<std::string> was;
    {
      std::lock_guard lock(m_mutex);
      m_totals.runs_considered = report.runs_considered;
      m_totals.runs_shipped += report.runs_shipped;
      m_totals.points_shipped += report.points_shipped;
      m_totals.batches += report.batches;
      was = std::exchange(m_problem, std::nullopt);
      m_complete = report.complete;
    }
    if (was && m_note) {
      m_note(fmt::format("shipping to {} works again; the store there is catching up", m_server_store->location()));
    }
    if (m_on_pass) {
      m_on_pass(Pass{.report = report, .problem = std::nullopt, .first_failure = false, .recovered = was.has_value()});
    }
    return true;
  } catch (const std::exception& error) {
    m_server_store.reset();  // reconnect next time: the connection may be dead
    bool first = false;
    {
      std::lock_guard lock(m_mutex);
      first = !m_problem.has_value();
      m_problem = error.what();
      ++m_failed_passes;
    }
    if (first && m_note) {
      m_note(fmt::format("cannot ship to the team store now ({}); training goes on, the runs stay in {} and are "
                         "shipped when it is back",
                         error.what(), m_local));
    }
    if (m_on_pass) {
      Pass failed;
      failed.problem = error.what();
      failed.first_failure = first;
      m_on_pass(failed);
    }
    return false;
  }
}

bool BackgroundShipper::wait(std::chrono::milliseconds wait) {
  std::unique_lock lock(m_mutex);
  return !m_wake.wait_for(lock, wait, [this] { return m_stop; });
}

void BackgroundShipper::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cancel.store(true);
  m_wake.notify_all();
}

ShipReport BackgroundShipper::follow(const util::InterruptSignals* signals) {
  EXPCTL_ASSERT(!m_thread.joinable(), "follow() is the foreground mode: this shipper has a thread");
  // The watcher owns the signals' pipe: it is made before this thread blocks them (a thread takes
  // its creator's mask), so they are delivered to it, and it wakes the wait below.
  std::thread watcher;
  if (signals != nullptr) {
    watcher = std::thread([this, fd = signals->fd()] {
      pollfd readable{fd, POLLIN, 0};
      while (true) {
        if (::poll(&readable, 1, 100) > 0) {  // the timeout only lets a stop() of another thread end it
          stop();
          return;
        }
        std::lock_guard lock(m_mutex);
        if (m_stop) {
          return;
        }
      }
    });
  }
  sigset_t blocked;
  sigemptyset(&blocked);
  for (const int signal : util::k_interrupt_signals) {
    sigaddset(&blocked, signal);
  }
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  ShipPacer pacer(m_interval);
  while (!m_cancel.load() && wait(pacer.after(pass()))) {
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (watcher.joinable()) {
    watcher.join();
  }
  return totals();
}

void BackgroundShipper::loop() {
  ShipPacer pacer(m_interval);
  while (wait(pacer.after(pass()))) {
  }
  // The run's last records: one pass whatever the backoff was waiting for, retried while the
  // server is away, until final_wait has passed (a batch under way is finished, not cut).
  const auto deadline = std::chrono::steady_clock::now() + m_final_wait;
  while (!pass(deadline) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(250), deadline - std::chrono::steady_clock::now()));
  }
}

}  // namespace expctl::store
