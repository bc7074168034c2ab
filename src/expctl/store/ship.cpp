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

#include "expctl/store/chunk_codec.hpp"
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

/// The last step of each (name, rank) series' last sealed chunk on the server: a node's chunks
/// past it are sent (those at or below it are the server's already, unless the node rewrote them).
std::map<SeriesKey, std::int64_t> server_sealed(PgConnection& server, const std::string& run_id) {
  const PgResult rows = server.exec(
      "SELECT k.name, c.rank, max(c.last_step) FROM metric_chunks c JOIN metric_keys k ON k.id = c.key_id "
      "WHERE c.run_id = $1 GROUP BY k.name, c.rank",
      {run_id});
  std::map<SeriesKey, std::int64_t> sealed;
  for (int row = 0; row < rows.rows(); ++row) {
    sealed[{rows.text(row, 0), static_cast<int>(rows.int64(row, 1))}] = rows.int64(row, 2);
  }
  return sealed;
}

/// One batch: the node's sealed chunks as metric_chunks rows and its open points as
/// metric_points rows (COPY text), the step ranges they cover (the server's chunks and points
/// there are replaced), and the last step of each series it holds.
struct Batch {
  std::string chunks;
  std::string points;
  std::size_t count = 0;  ///< points, in the chunks and open
  bool full = false;      ///< batch_points reached, or the next chunk does not fit: there may be more
  std::vector<std::int64_t> range_keys, range_ranks, range_firsts, range_lasts;
  /// (key id, rank) -> last step in the batch, and the node's rewrites the server then has
  std::map<std::pair<int, int>, Progress> progress;

  void cover(int key, int rank, std::int64_t first, std::int64_t last) {
    range_keys.push_back(key);
    range_ranks.push_back(rank);
    range_firsts.push_back(first);
    range_lasts.push_back(last);
  }
};

/// A series of the run and how far it has been read.
struct Cursor {
  Series series;
  int key = 0;  ///< its metric_keys.id on the server
  /// The node's sealed chunks with last_step past this go (the server's last sealed step).
  std::int64_t after_chunk = detail::k_no_step;
  /// Its open points past this go (the step the server has the series up to).
  std::int64_t after_point = detail::k_no_step;
  /// The node has rewritten points the server has (series_rewrites grew): the series goes again
  /// whole, replacing the server's; the node's count, which the server's progress takes once it has.
  std::optional<std::int64_t> resend{};
  /// The node's rewrites when the pass began; a series new to the server gets them all with its
  /// points, so this is what its progress records (0 for a series the server had).
  std::int64_t rewrites_sent = 0;
  bool done = false;  ///< its open points are read: nothing left this pass
};

/// `numbers` as an SQL array literal ("{1,2,3}").
std::string array_text(const std::vector<std::int64_t>& numbers) {
  std::string out = "{";
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    out += (i == 0 ? "" : ",") + std::to_string(numbers[i]);
  }
  return out + "}";
}

class ChunkShipper {
 public:
  ChunkShipper(Connection& local, PgBackend& server, const LocalRun& run, const RunRows& rows,
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

  /// Sends every chunk the server lacks and the open points past the shipped step of each series;
  /// the last batch also carries the run's row as the node holds it and its ship_state
  /// (write_run_state). The next batch is read from the local store while the server takes the
  /// one before, instead of each waiting for the other. Returns false when the deadline passed
  /// first: what was committed stays, the run's state waits for the next pass.
  bool run() {
    const auto progress = server_progress(m_server.connection(), m_run.id());
    const auto sealed = server_sealed(m_server.connection(), m_run.id());
    const auto rewrites = local_rewrites(m_local, m_run.id());
    for (const Series& series : local_series(m_local, m_run.id())) {
      const SeriesKey name_rank{series.name, series.rank};
      const auto found = progress.find(name_rank);
      const int key = m_server.key_id(series.name);  // outside any transaction: see PgBackend::key_id
      Cursor cursor{series, key};
      cursor.resend = rewrites_to_resend(progress, rewrites, name_rank);
      if (!cursor.resend) {
        if (const auto chunks = sealed.find(name_rank); chunks != sealed.end()) {
          cursor.after_chunk = chunks->second;
        }
        if (found != progress.end()) {
          cursor.after_point = found->second.last_step;
        }
      }
      const auto rewritten = rewrites.find(name_rank);
      if (found == progress.end() && rewritten != rewrites.end()) {
        cursor.rewrites_sent = rewritten->second;
      }
      m_cursors.push_back(std::move(cursor));
    }
    Batch batch = read_batch();
    while (true) {
      const bool full = batch.full;  // there may be more
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
  /// Up to batch_points points past the cursors, series after series: whole chunks (one alone may
  /// hold more), then a series' open points all together.
  Batch read_batch() {
    Batch batch;
    for (; m_next < m_cursors.size() && !batch.full; ++m_next) {
      Cursor& cursor = m_cursors[m_next];
      while (!cursor.done && !batch.full) {
        read_piece(cursor, batch);
      }
      if (batch.full) {
        break;  // this series may have more: the next batch starts at it
      }
    }
    return batch;
  }

  /// What one read of a series adds to a batch.
  struct Piece {
    Batch part;
    std::int64_t last_chunk = 0;
    std::int64_t last_step = detail::k_no_step;
    bool done = false;
  };

  /// Adds a series' chunks past its cursor, as many as the batch has room for (one at least into
  /// an empty batch), and once they are all in, its open points past the cursor, in one read
  /// snapshot.
  void read_piece(Cursor& cursor, Batch& batch) {
    const std::size_t room = m_batch_points - std::min(m_batch_points, batch.count);
    const bool empty = batch.count == 0;
    Piece piece = m_local.retry([&] {
      Piece read;
      read.last_chunk = cursor.after_chunk;
      const detail::ReadSnapshot snapshot(m_local.db());
      SQLite::Statement chunks(
          m_local.db(),
          "SELECT first_step, last_step, points, nan_points, min_value, max_value, sum_value, first_bits, "
          "last_bits, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND last_step > ?4 "
          "ORDER BY last_step");
      bind(chunks, cursor);
      chunks.bind(4, static_cast<int64_t>(cursor.after_chunk));
      bool more = false;
      while (chunks.executeStep()) {
        if ((!empty || read.part.count > 0) &&
            read.part.count + static_cast<std::size_t>(chunks.getColumn(2).getInt64()) > room) {
          read.part.full = more = true;
          break;
        }
        chunk::Header header;
        header.first_step = chunks.getColumn(0).getInt64();
        header.last_step = chunks.getColumn(1).getInt64();
        header.count = chunks.getColumn(2).getInt64();
        header.nan_count = chunks.getColumn(3).getInt64();
        header.min = chunks.getColumn(4).getDouble();
        header.max = chunks.getColumn(5).getDouble();
        header.sum =
            chunks.getColumn(6).isNull() ? std::numeric_limits<double>::quiet_NaN() : chunks.getColumn(6).getDouble();
        header.first_bits = static_cast<std::uint64_t>(chunks.getColumn(7).getInt64());
        header.last_bits = static_cast<std::uint64_t>(chunks.getColumn(8).getInt64());
        const SQLite::Column data = chunks.getColumn(9);
        read.part.chunks += detail::chunk_copy_row(
            m_run.id(), cursor.key, cursor.series.rank, header,
            {static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())});
        read.part.cover(cursor.key, cursor.series.rank, header.first_step, header.last_step);
        read.part.count += static_cast<std::size_t>(header.count);
        read.last_chunk = read.last_step = header.last_step;
      }
      if (more) {
        return read;
      }
      SQLite::Statement open(m_local.db(),
                             "SELECT step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                             "AND step > ?4 ORDER BY step");
      bind(open, cursor);
      open.bind(4, static_cast<int64_t>(cursor.after_point));
      std::optional<std::int64_t> first;
      while (open.executeStep()) {
        const std::int64_t step = open.getColumn(0).getInt64();
        first = first.value_or(step);
        read.part.points += fmt::format("{}\t{}\t{}\t{}\t{}\n", m_run.id(), cursor.key, cursor.series.rank, step,
                                        open.getColumn(1).getInt64());
        read.part.count += 1;
        read.last_step = step;
      }
      if (first) {
        read.part.cover(cursor.key, cursor.series.rank, *first, read.last_step);
      }
      read.done = true;
      return read;
    });
    cursor.after_chunk = piece.last_chunk;
    cursor.done = piece.done;
    if (piece.last_step != detail::k_no_step) {
      cursor.after_point = std::max(cursor.after_point, piece.last_step);
    }
    batch.chunks += piece.part.chunks;
    batch.points += piece.part.points;
    batch.count += piece.part.count;
    batch.full = piece.part.full || batch.count >= m_batch_points;
    for (std::size_t i = 0; i < piece.part.range_keys.size(); ++i) {
      batch.cover(static_cast<int>(piece.part.range_keys[i]), static_cast<int>(piece.part.range_ranks[i]),
                  piece.part.range_firsts[i], piece.part.range_lasts[i]);
    }
    // A resent series' progress takes the node's rewrites with its last piece.
    const std::int64_t rewrites = cursor.resend ? (cursor.done ? *cursor.resend : 0) : cursor.rewrites_sent;
    if (piece.part.count > 0 || (cursor.resend && cursor.done)) {
      batch.progress[{cursor.key, cursor.series.rank}] = {cursor.after_point, rewrites};
    }
  }

  void bind(SQLite::Statement& statement, const Cursor& cursor) const {
    statement.bind(1, m_run.id());
    statement.bind(2, static_cast<int64_t>(cursor.series.local_key));
    statement.bind(3, cursor.series.rank);
  }

  /// The batch into the server's series tables: what the server has in the steps the batch covers
  /// goes (its open points the node has sealed since, or a series the node rewrote), then the
  /// node's chunks and points go in by COPY, with each series' progress, in one transaction.
  void write_batch(PgConnection& server, const Batch& batch) {
    m_server.hold_series(m_run.id());
    const PgParams ranges{m_run.id(), array_text(batch.range_keys), array_text(batch.range_ranks),
                          array_text(batch.range_firsts), array_text(batch.range_lasts)};
    constexpr const char* k_ranges =
        "unnest($2::integer[], $3::integer[], $4::bigint[], $5::bigint[]) AS r(key_id, rank, first_step, last_step)";
    server.exec(fmt::format("DELETE FROM metric_chunks c USING {} WHERE c.run_id = $1 AND c.key_id = r.key_id AND "
                            "c.rank = r.rank AND c.first_step <= r.last_step AND c.last_step >= r.first_step",
                            k_ranges),
                ranges);
    server.exec(fmt::format("DELETE FROM metric_points p USING {} WHERE p.run_id = $1 AND p.key_id = r.key_id AND "
                            "p.rank = r.rank AND p.step BETWEEN r.first_step AND r.last_step",
                            k_ranges),
                ranges);
    if (!batch.chunks.empty()) {
      server.copy_in(detail::k_chunk_copy, batch.chunks);
    }
    if (!batch.points.empty()) {
      server.copy_in("COPY metric_points (run_id, key_id, rank, step, bits) FROM STDIN", batch.points);
    }
  }

  void write_progress(PgConnection& server, const Batch& batch) {
    std::vector<std::int64_t> keys, ranks, steps, rewrites;
    for (const auto& [series, shipped] : batch.progress) {
      keys.push_back(series.first);
      ranks.push_back(series.second);
      steps.push_back(shipped.last_step);
      rewrites.push_back(shipped.rewrites);
    }
    server.exec(
        "INSERT INTO ship_progress (run_id, key_id, rank, last_step, rewrites) SELECT $1, k, r, s, w FROM "
        "unnest($2::integer[], $3::integer[], $4::bigint[], $5::bigint[]) AS t(k, r, s, w) "
        "ON CONFLICT (run_id, key_id, rank) DO UPDATE SET last_step = greatest(ship_progress.last_step, "
        "excluded.last_step), rewrites = greatest(ship_progress.rewrites, excluded.rewrites)",
        {m_run.id(), array_text(keys), array_text(ranks), array_text(steps), array_text(rewrites)});
  }

  void flush(const Batch& batch, bool last) {
    if (batch.count == 0 && batch.progress.empty() && !last) {
      return;
    }
    PgConnection& server = m_server.connection();
    std::int64_t tags_added = 0;
    server.transaction([&] {
      tags_added = 0;  // a transaction tried again counts afresh
      if (batch.count > 0) {
        write_batch(server, batch);
      }
      if (!batch.progress.empty()) {
        write_progress(server, batch);
      }
      if (last) {
        tags_added = write_run_state(server, m_run, m_rows);
      }
    });
    m_report.tags_added += tags_added;
    if (batch.count > 0) {
      m_report.points_shipped += static_cast<std::int64_t>(batch.count);
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

/// Series tables the server has never analysed (a new team server's first ship) are analysed
/// once: without statistics the planner guesses row counts for the series reads until autovacuum
/// gets to them (with a row per point, compare of two 100 000-step runs took 0.93 s instead of
/// 0.6 s). ANALYZE samples a fixed number of rows, so it costs about the same for any table size;
/// a role that does not own the tables gets a warning from the server, not an error.
void analyze_if_never_analyzed(PgConnection& server) {
  const PgResult never = server.exec(
      "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables "
      "WHERE relid = 'metric_chunks'::regclass");
  if (never.rows() == 1 && never.text(0, 0) == "t") {
    server.exec("ANALYZE metric_chunks, metric_points");
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
    if (!ChunkShipper(source, destination, run, rows, options, report).run()) {
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
