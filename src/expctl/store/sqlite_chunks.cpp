// A SQLite store's series as chunks (sqlite_chunks.hpp).
#include "expctl/store/sqlite_chunks.hpp"

#include <algorithm>
#include <cmath>

#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::store::detail {

namespace {

using chunk::bits_of;
using chunk::value_of;

/// One run's chunk tables in a SQLite store, in the caller's transaction (series_chunks.hpp).
class SqliteChunkTables final : public ChunkTables {
 public:
  SqliteChunkTables(SQLite::Database& db, std::string run_id)
      : m_db(db),
        m_run_id(std::move(run_id)),
        m_last_chunk(db,
                     "SELECT last_step, points FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                     "ORDER BY last_step DESC LIMIT 1"),
        m_last_open(db,
                    "SELECT max(step), (SELECT count(*) FROM (SELECT 1 FROM metric_points WHERE run_id = ?1 AND "
                    "key_id = ?2 AND rank = ?3 LIMIT ?4)) FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                    "rank = ?3"),
        m_opened(db,
                 "SELECT rowid, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND "
                 "last_step >= ?4 ORDER BY last_step"),
        m_drop_chunk(db, "DELETE FROM metric_chunks WHERE rowid = ?1"),
        m_stage(db,
                "INSERT INTO metric_points (run_id, key_id, rank, step, bits) VALUES (?1, ?2, ?3, ?4, ?5) "
                "ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET bits = excluded.bits"),
        m_first_open(db,
                     "SELECT step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                     "ORDER BY step LIMIT ?4"),
        m_seal(db,
               "INSERT INTO metric_chunks (run_id, key_id, rank, first_step, last_step, points, nan_points, "
               "min_value, max_value, sum_value, first_bits, last_bits, data) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
        m_unstage(db, "DELETE FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND step <= ?4") {}

  SeriesTail tail(const SeriesKeyRank& series) override {
    SeriesTail tail;
    bind(m_last_chunk, series);
    if (m_last_chunk.executeStep()) {
      tail.sealed_last = m_last_chunk.getColumn(0).getInt64();
      tail.sealed_points = m_last_chunk.getColumn(1).getInt64();
    }
    m_last_chunk.reset();
    bind(m_last_open, series);
    m_last_open.bind(4, static_cast<int64_t>(chunk::k_chunk_points));
    if (m_last_open.executeStep() && !m_last_open.getColumn(0).isNull()) {
      tail.open_last = m_last_open.getColumn(0).getInt64();
      tail.open_points = m_last_open.getColumn(1).getInt64();
    }
    m_last_open.reset();
    return tail;
  }

  void take_chunks(const SeriesKeyRank& series, std::int64_t from, std::vector<std::int64_t>& steps,
                   std::vector<std::uint64_t>& bits) override {
    bind(m_opened, series);
    m_opened.bind(4, static_cast<int64_t>(from));
    std::vector<std::int64_t> rowids;
    while (m_opened.executeStep()) {
      rowids.push_back(m_opened.getColumn(0).getInt64());
      const SQLite::Column data = m_opened.getColumn(1);
      chunk::decode(
          std::string_view(static_cast<const char*>(data.getBlob()), static_cast<std::size_t>(data.getBytes())), steps,
          bits);
    }
    m_opened.reset();
    for (const std::int64_t rowid : rowids) {
      m_drop_chunk.bind(1, static_cast<int64_t>(rowid));
      m_drop_chunk.exec();
      m_drop_chunk.reset();
    }
  }

  void stage(const SeriesKeyRank& series, std::span<const std::int64_t> steps,
             std::span<const std::uint64_t> bits) override {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      bind(m_stage, series);
      m_stage.bind(4, static_cast<int64_t>(steps[i]));
      m_stage.bind(5, static_cast<int64_t>(bits[i]));
      m_stage.exec();
      m_stage.reset();
    }
  }

  void first_open(const SeriesKeyRank& series, std::int64_t limit, std::vector<std::int64_t>& steps,
                  std::vector<std::uint64_t>& bits) override {
    bind(m_first_open, series);
    m_first_open.bind(4, static_cast<int64_t>(limit));
    while (m_first_open.executeStep()) {
      steps.push_back(m_first_open.getColumn(0).getInt64());
      bits.push_back(static_cast<std::uint64_t>(m_first_open.getColumn(1).getInt64()));
    }
    m_first_open.reset();
  }

  void unstage(const SeriesKeyRank& series, std::int64_t upto) override {
    bind(m_unstage, series);
    m_unstage.bind(4, static_cast<int64_t>(upto));
    m_unstage.exec();
    m_unstage.reset();
  }

  /// The run's last chunks are mostly shorter than a page: written in series order, SQLite puts
  /// each on the last page or, where it does not fit, on a new one, and 1-2 KiB rows fill pages by
  /// about two thirds (the quick start: 10 pages for 7.5 pages of rows). Written packed, fewer.
  void put_last_chunks(std::span<const Pending> chunks) override {
    std::vector<std::size_t> cells;
    for (const Pending& pending : chunks) {
      cells.push_back(pending.data.size() + m_run_id.size() + k_chunk_row_bytes);
    }
    const auto page = static_cast<std::size_t>(m_db.execAndGet("PRAGMA page_size").getInt64());
    for (const std::size_t i : page_packing_order(cells, page)) {
      put_chunk(chunks[i].series, chunks[i].header, chunks[i].data);
    }
  }

  void put_chunk(const SeriesKeyRank& series, const chunk::Header& header, std::string_view data) override {
    bind(m_seal, series);
    m_seal.bind(4, static_cast<int64_t>(header.first_step));
    m_seal.bind(5, static_cast<int64_t>(header.last_step));
    m_seal.bind(6, static_cast<int64_t>(header.count));
    m_seal.bind(7, static_cast<int64_t>(header.nan_count));
    if (header.nan_count < header.count) {
      m_seal.bind(8, header.min);
      m_seal.bind(9, header.max);
    } else {
      m_seal.bind(8);
      m_seal.bind(9);
    }
    m_seal.bind(10, header.sum);  // a NaN sum (Inf - Inf) binds as NULL
    m_seal.bind(11, static_cast<int64_t>(header.first_bits));
    m_seal.bind(12, static_cast<int64_t>(header.last_bits));
    m_seal.bind(13, data.data(), static_cast<int>(data.size()));
    m_seal.exec();
    m_seal.reset();
  }

  void add_rewrites(const std::map<SeriesKeyRank, std::int64_t>& rewrites) override {
    if (rewrites.empty()) {
      return;
    }
    SQLite::Statement add(m_db,
                          "INSERT INTO series_rewrites (run_id, key_id, rank, rewrites) VALUES (?, ?, ?, ?) "
                          "ON CONFLICT (run_id, key_id, rank) DO UPDATE SET rewrites = rewrites + excluded.rewrites");
    for (const auto& [series, count] : rewrites) {
      bind(add, series);
      add.bind(4, static_cast<int64_t>(count));
      add.exec();
      add.reset();
    }
  }

  std::vector<SeriesKeyRank> open_series() override {
    SQLite::Statement open(m_db, "SELECT DISTINCT key_id, rank FROM metric_points WHERE run_id = ?");
    open.bind(1, m_run_id);
    std::vector<SeriesKeyRank> series;
    while (open.executeStep()) {
      series.push_back({open.getColumn(0).getInt64(), open.getColumn(1).getInt()});
    }
    return series;
  }

 private:
  void bind(SQLite::Statement& statement, const SeriesKeyRank& series) const {
    statement.bind(1, m_run_id);
    statement.bind(2, static_cast<int64_t>(series.key));
    statement.bind(3, series.rank);
  }

  SQLite::Database& m_db;
  std::string m_run_id;
  SQLite::Statement m_last_chunk;
  SQLite::Statement m_last_open;
  SQLite::Statement m_opened;
  SQLite::Statement m_drop_chunk;
  SQLite::Statement m_stage;
  SQLite::Statement m_first_open;
  SQLite::Statement m_seal;
  SQLite::Statement m_unstage;
};

std::string_view blob(const SQLite::Column& column) {
  return {static_cast<const char*>(column.getBlob()), static_cast<std::size_t>(column.getBytes())};
}

}  // namespace

ReadSnapshot::ReadSnapshot(SQLite::Database& db) : m_db(db) {
  if (sqlite3_get_autocommit(db.getHandle()) != 0) {
    db.exec("BEGIN DEFERRED");
    m_began = true;
  }
}

ReadSnapshot::~ReadSnapshot() {
  if (m_began && sqlite3_get_autocommit(m_db.getHandle()) == 0) {
    try {
      m_db.exec("COMMIT");  // a read transaction: nothing to write, it only ends the snapshot
    } catch (const SQLite::Exception&) {
      sqlite3_exec(m_db.getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
}

void write_points(SQLite::Database& db, const std::string& run_id, const std::map<std::string, std::int64_t>& keys,
                  std::span<const MetricPoint> points) {
  std::map<SeriesKeyRank, std::vector<StepBits>> by_series;
  for (const MetricPoint& point : points) {
    by_series[{keys.at(point.name), point.rank}].emplace_back(point.step, bits_of(point.value));
  }
  SqliteChunkTables tables(db, run_id);
  write_series(tables, std::move(by_series));
}

std::vector<std::size_t> page_packing_order(std::span<const std::size_t> cells, std::size_t page) {
  const std::size_t room = page - k_leaf_header_bytes;
  std::vector<std::size_t> order;
  std::vector<std::size_t> fitting;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    (cells[i] <= room ? fitting : order).push_back(i);  // a row larger than a page overflows anyway
  }
  std::stable_sort(fitting.begin(), fitting.end(), [&](std::size_t a, std::size_t b) { return cells[a] > cells[b]; });
  std::vector<std::size_t> used;                // bytes of each page
  std::vector<std::vector<std::size_t>> pages;  // the rows of each page
  for (const std::size_t i : fitting) {
    std::size_t at = 0;
    while (at < pages.size() && used[at] + cells[i] > room) {
      ++at;
    }
    if (at == pages.size()) {
      used.push_back(0);
      pages.emplace_back();
    }
    used[at] += cells[i];
    pages[at].push_back(i);
  }
  for (const auto& rows : pages) {
    order.insert(order.end(), rows.begin(), rows.end());
  }
  return order;
}

void seal_run(SQLite::Database& db, const std::string& run_id) {
  SqliteChunkTables tables(db, run_id);
  seal_open_series(tables);
}

std::vector<SeriesColumns> read_series(SQLite::Database& db, const std::string& run_id, std::int64_t key,
                                       std::optional<int> rank, std::int64_t after, std::int64_t upto,
                                       std::size_t limit) {
  const ReadSnapshot snapshot(db);
  SeriesCollector collector(after, upto, limit);
  const auto bind_range = [&](SQLite::Statement& query) {
    query.bind(1, run_id);
    query.bind(2, static_cast<int64_t>(key));
    if (rank) {
      query.bind(3, *rank);
    }
    query.bind(4, static_cast<int64_t>(after));
    query.bind(5, static_cast<int64_t>(upto));
  };
  {
    SQLite::Statement chunks(db,
                             "SELECT rank, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND "
                             "(?3 IS NULL OR rank = ?3) AND last_step > ?4 AND first_step <= ?5 ORDER BY rank, "
                             "last_step");
    bind_range(chunks);
    while (chunks.executeStep()) {
      const int r = chunks.getColumn(0).getInt();
      if (rank && collector.full(r)) {
        break;  // one rank's chunks come in step order: the rest are past the limit
      }
      collector.add_chunk(r, blob(chunks.getColumn(1)));
    }
  }
  SQLite::Statement staged(db,
                           "SELECT rank, step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                           "(?3 IS NULL OR rank = ?3) AND step > ?4 AND step <= ?5 ORDER BY rank, step");
  bind_range(staged);
  while (staged.executeStep()) {
    collector.add(staged.getColumn(0).getInt(), staged.getColumn(1).getInt64(),
                  static_cast<std::uint64_t>(staged.getColumn(2).getInt64()));
  }
  return collector.take();
}

std::vector<SeriesKeyRank> run_series(SQLite::Database& db, const std::string& run_id) {
  SQLite::Statement query(db,
                          "SELECT key_id, rank FROM metric_chunks WHERE run_id = ?1 UNION "
                          "SELECT key_id, rank FROM metric_points WHERE run_id = ?1 ORDER BY 1, 2");
  query.bind(1, run_id);
  std::vector<SeriesKeyRank> series;
  while (query.executeStep()) {
    series.push_back({query.getColumn(0).getInt64(), query.getColumn(1).getInt()});
  }
  return series;
}

std::int64_t count_points(SQLite::Database& db, const std::string& run_id, std::optional<SeriesKeyRank> series,
                          std::int64_t after) {
  const ReadSnapshot snapshot(db);
  const char* k_series = series ? " AND key_id = ?3 AND rank = ?4" : "";
  const auto bind = [&](SQLite::Statement& query) {
    query.bind(1, run_id);
    query.bind(2, static_cast<int64_t>(after));
    if (series) {
      query.bind(3, static_cast<int64_t>(series->key));
      query.bind(4, series->rank);
    }
  };
  std::int64_t count = 0;
  SQLite::Statement whole(
      db, fmt::format("SELECT total(points) FROM metric_chunks WHERE run_id = ?1 AND first_step > ?2{}", k_series));
  bind(whole);
  whole.executeStep();
  count += static_cast<std::int64_t>(whole.getColumn(0).getDouble());
  SQLite::Statement straddling(
      db, fmt::format("SELECT data FROM metric_chunks WHERE run_id = ?1 AND first_step <= ?2 AND last_step > ?2{}",
                      k_series));
  bind(straddling);
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  while (straddling.executeStep()) {
    steps.clear();
    bits.clear();
    chunk::decode(blob(straddling.getColumn(0)), steps, bits);
    count += std::count_if(steps.begin(), steps.end(), [&](std::int64_t step) { return step > after; });
  }
  SQLite::Statement staged(
      db, fmt::format("SELECT count(*) FROM metric_points WHERE run_id = ?1 AND step > ?2{}", k_series));
  bind(staged);
  staged.executeStep();
  return count + staged.getColumn(0).getInt64();
}

std::int64_t metric_key(SQLite::Database& db, const std::string& name) {
  SQLite::Statement make(db, "INSERT INTO metric_keys (name) VALUES (?) ON CONFLICT (name) DO NOTHING");
  make.bind(1, name);
  make.exec();
  SQLite::Statement find(db, "SELECT id FROM metric_keys WHERE name = ?");
  find.bind(1, name);
  EXPCTL_ASSERT(find.executeStep(), "metric key {} was just made", name);
  return find.getColumn(0).getInt64();
}

void insert_sealed_chunks(SQLite::Database& db, const std::string& run_id, const SeriesKeyRank& series,
                          std::span<const std::pair<chunk::Header, std::string>> chunks) {
  // Through the writer's own chunk insert (SqliteChunkTables::put_chunk): one place for the row.
  SqliteChunkTables tables(db, run_id);
  for (const auto& sealed : chunks) {
    tables.put_chunk(series, sealed.first, sealed.second);
  }
}

void chunk_metrics_table(SQLite::Database& db) {
  SQLite::Statement rows(db,
                         "SELECT run_id, key_id, rank, step, value FROM metrics ORDER BY run_id, key_id, rank, step");
  std::string run_id;
  std::optional<SqliteChunkTables> tables;
  SeriesKeyRank series{-1, -1};
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  std::int64_t last_step = 0;  // of the series, across its chunks
  bool series_begins = true;   // the row is its series' first
  const auto flush = [&] {
    if (!steps.empty()) {
      tables->put_chunk(series, chunk::summarize(steps, bits), chunk::encode(steps, bits));
      steps.clear();
      bits.clear();
    }
  };
  while (rows.executeStep()) {
    const std::string row_run = rows.getColumn(0).getString();
    const SeriesKeyRank row_series{rows.getColumn(1).getInt64(), rows.getColumn(2).getInt()};
    if (row_run != run_id || row_series != series || static_cast<std::int64_t>(steps.size()) == chunk::k_chunk_points) {
      flush();
      if (row_run != run_id || !tables) {
        tables.emplace(db, row_run);
      }
      series_begins = row_run != run_id || row_series != series;
      run_id = row_run;
      series = row_series;
    }
    // A v6 store's primary key keeps a series' steps unique and ascending; a hand-edited or
    // damaged file can still hold a step that is not an integer, or rows out of order.
    const SQLite::Column step = rows.getColumn(3);
    EXPCTL_CHECK(step.getType() == SQLITE_INTEGER && (series_begins || step.getInt64() > last_step), util::StoreError,
                 "{}: cannot migrate to schema v8: run {}'s metric (key {}, rank {}) holds step {} after step {} "
                 "(a damaged or hand-edited metrics table); the store is unchanged: restore it from a backup, or "
                 "delete those rows with sqlite3",
                 db.getFilename(), util::quoted(row_run.substr(0, 40)), row_series.key, row_series.rank,
                 util::quoted(step.getString().substr(0, 40)),
                 series_begins ? std::string("none") : std::to_string(last_step));
    last_step = step.getInt64();
    series_begins = false;
    steps.push_back(last_step);
    bits.push_back(rows.getColumn(4).isNull() ? bits_of(std::numeric_limits<double>::quiet_NaN())
                                              : bits_of(rows.getColumn(4).getDouble()));
  }
  flush();
  db.exec("DROP TABLE metrics");
}

}  // namespace expctl::store::detail
