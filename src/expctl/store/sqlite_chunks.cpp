// A SQLite store's series as chunks (sqlite_chunks.hpp).
#include "expctl/store/sqlite_chunks.hpp"

#include <algorithm>
#include <cmath>

#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/util/error.hpp"

namespace expctl::store::detail {

namespace {

using chunk::bits_of;
using chunk::value_of;

/// The series' last sealed chunk: its last step and how many points it holds.
struct LastChunk {
  std::int64_t last_step = 0;
  std::int64_t points = 0;
};

class SeriesStatements {
 public:
  explicit SeriesStatements(SQLite::Database& db)
      : m_last_chunk(db,
                     "SELECT last_step, points FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                     "ORDER BY last_step DESC LIMIT 1"),
        m_last_staged(db, "SELECT max(step) FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3"),
        m_staged_count(db,
                       "SELECT count(*) FROM (SELECT 1 FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                       "rank = ?3 LIMIT ?4)"),
        m_opened(db,
                 "SELECT rowid, data FROM metric_chunks WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND "
                 "last_step >= ?4 ORDER BY last_step"),
        m_drop_chunk(db, "DELETE FROM metric_chunks WHERE rowid = ?1"),
        m_stage(db,
                "INSERT INTO metric_points (run_id, key_id, rank, step, bits) VALUES (?1, ?2, ?3, ?4, ?5) "
                "ON CONFLICT (run_id, key_id, rank, step) DO UPDATE SET bits = excluded.bits"),
        m_first_staged(db,
                       "SELECT step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 "
                       "ORDER BY step LIMIT ?4"),
        m_seal(db,
               "INSERT INTO metric_chunks (run_id, key_id, rank, first_step, last_step, points, nan_points, "
               "min_value, max_value, sum_value, first_bits, last_bits, data) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
        m_unstage(db, "DELETE FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND rank = ?3 AND step <= ?4") {}

  std::optional<LastChunk> last_chunk(const std::string& run_id, const SeriesKeyRank& series) {
    bind(m_last_chunk, run_id, series);
    std::optional<LastChunk> last;
    if (m_last_chunk.executeStep()) {
      last = LastChunk{m_last_chunk.getColumn(0).getInt64(), m_last_chunk.getColumn(1).getInt64()};
    }
    m_last_chunk.reset();
    return last;
  }

  std::optional<std::int64_t> last_staged(const std::string& run_id, const SeriesKeyRank& series) {
    bind(m_last_staged, run_id, series);
    std::optional<std::int64_t> last;
    if (m_last_staged.executeStep() && !m_last_staged.getColumn(0).isNull()) {
      last = m_last_staged.getColumn(0).getInt64();
    }
    m_last_staged.reset();
    return last;
  }

  /// Opens again every sealed chunk of the series with last_step >= `from`: its points go back to
  /// metric_points (all above the chunks that stay sealed), and the chunk row goes.
  void open_from(const std::string& run_id, const SeriesKeyRank& series, std::int64_t from) {
    bind(m_opened, run_id, series);
    m_opened.bind(4, static_cast<int64_t>(from));
    std::vector<std::int64_t> rowids;
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
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
    for (std::size_t i = 0; i < steps.size(); ++i) {
      stage(run_id, series, steps[i], bits[i]);
    }
  }

  void stage(const std::string& run_id, const SeriesKeyRank& series, std::int64_t step, std::uint64_t bits) {
    bind(m_stage, run_id, series);
    m_stage.bind(4, static_cast<int64_t>(step));
    m_stage.bind(5, static_cast<int64_t>(bits));
    m_stage.exec();
    m_stage.reset();
  }

  /// Seals the series' open points k_chunk_points at a time (seal_run seals the last fewer).
  void seal(const std::string& run_id, const SeriesKeyRank& series) {
    while (true) {
      bind(m_staged_count, run_id, series);
      m_staged_count.bind(4, static_cast<int64_t>(chunk::k_chunk_points));
      m_staged_count.executeStep();
      const std::int64_t staged = m_staged_count.getColumn(0).getInt64();
      m_staged_count.reset();
      if (staged < chunk::k_chunk_points) {
        return;
      }
      bind(m_first_staged, run_id, series);
      m_first_staged.bind(4, static_cast<int64_t>(chunk::k_chunk_points));
      std::vector<std::int64_t> steps;
      std::vector<std::uint64_t> bits;
      while (m_first_staged.executeStep()) {
        steps.push_back(m_first_staged.getColumn(0).getInt64());
        bits.push_back(static_cast<std::uint64_t>(m_first_staged.getColumn(1).getInt64()));
      }
      m_first_staged.reset();
      if (steps.empty()) {
        return;
      }
      write_chunk(m_seal, run_id, series, steps, bits);
      bind(m_unstage, run_id, series);
      m_unstage.bind(4, static_cast<int64_t>(steps.back()));
      m_unstage.exec();
      m_unstage.reset();
      if (static_cast<std::int64_t>(steps.size()) < chunk::k_chunk_points) {
        return;
      }
    }
  }

  /// Writes `batch` into the series' open chunk, replacing points of the same steps.
  void stage_all(const std::string& run_id, const SeriesKeyRank& series,
                 std::span<const std::pair<std::int64_t, std::uint64_t>> batch) {
    for (const auto& [step, pattern] : batch) {
      stage(run_id, series, step, pattern);
    }
  }

  /// Appends `batch` (every step above the series' last) to its open chunk. Where that fills
  /// chunks, they are sealed from the open points and the batch in memory: only what is left
  /// over is written row by row (a point of a long batch is never inserted and then deleted).
  void append(const std::string& run_id, const SeriesKeyRank& series,
              std::span<const std::pair<std::int64_t, std::uint64_t>> batch) {
    bind(m_staged_count, run_id, series);
    m_staged_count.bind(4, static_cast<int64_t>(chunk::k_chunk_points));
    m_staged_count.executeStep();
    const std::int64_t staged = m_staged_count.getColumn(0).getInt64();
    m_staged_count.reset();
    if (staged + static_cast<std::int64_t>(batch.size()) < chunk::k_chunk_points) {
      stage_all(run_id, series, batch);
      return;
    }
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    if (staged > 0) {
      bind(m_first_staged, run_id, series);
      m_first_staged.bind(4, static_cast<int64_t>(chunk::k_chunk_points));
      while (m_first_staged.executeStep()) {
        steps.push_back(m_first_staged.getColumn(0).getInt64());
        bits.push_back(static_cast<std::uint64_t>(m_first_staged.getColumn(1).getInt64()));
      }
      m_first_staged.reset();
      bind(m_unstage, run_id, series);
      m_unstage.bind(4, static_cast<int64_t>(steps.back()));
      m_unstage.exec();
      m_unstage.reset();
    }
    for (const auto& [step, pattern] : batch) {
      steps.push_back(step);
      bits.push_back(pattern);
    }
    const auto size = static_cast<std::size_t>(chunk::k_chunk_points);
    std::size_t from = 0;
    for (; steps.size() - from >= size; from += size) {
      write_chunk(m_seal, run_id, series, std::span(steps).subspan(from, size), std::span(bits).subspan(from, size));
    }
    for (std::size_t i = from; i < steps.size(); ++i) {
      stage(run_id, series, steps[i], bits[i]);
    }
  }

  /// A chunk encoded and not written yet.
  struct Pending {
    SeriesKeyRank series;
    chunk::Header header;
    std::string data;
  };

  /// Takes every open point of the series out of metric_points, as chunks of up to
  /// k_chunk_points for the caller to write (seal_run writes them in the order that packs pages).
  void take_open(const std::string& run_id, const SeriesKeyRank& series, std::vector<Pending>& out) {
    bind(m_first_staged, run_id, series);
    m_first_staged.bind(4, static_cast<int64_t>(std::numeric_limits<std::int64_t>::max()));
    std::vector<std::int64_t> steps;
    std::vector<std::uint64_t> bits;
    while (m_first_staged.executeStep()) {
      steps.push_back(m_first_staged.getColumn(0).getInt64());
      bits.push_back(static_cast<std::uint64_t>(m_first_staged.getColumn(1).getInt64()));
    }
    m_first_staged.reset();
    if (steps.empty()) {
      return;
    }
    const auto size = static_cast<std::size_t>(chunk::k_chunk_points);
    for (std::size_t from = 0; from < steps.size(); from += size) {
      const std::size_t count = std::min(size, steps.size() - from);
      const auto some_steps = std::span(steps).subspan(from, count);
      const auto some_bits = std::span(bits).subspan(from, count);
      out.push_back({series, chunk::summarize(some_steps, some_bits), chunk::encode(some_steps, some_bits)});
    }
    bind(m_unstage, run_id, series);
    m_unstage.bind(4, static_cast<int64_t>(steps.back()));
    m_unstage.exec();
    m_unstage.reset();
  }

  static void write_chunk(SQLite::Statement& insert, const std::string& run_id, const SeriesKeyRank& series,
                          std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits) {
    insert_chunk(insert, run_id, {series, chunk::summarize(steps, bits), chunk::encode(steps, bits)});
  }

  static void insert_chunk(SQLite::Statement& insert, const std::string& run_id, const Pending& pending) {
    const chunk::Header& header = pending.header;
    const std::string& data = pending.data;
    bind(insert, run_id, pending.series);
    insert.bind(4, static_cast<int64_t>(header.first_step));
    insert.bind(5, static_cast<int64_t>(header.last_step));
    insert.bind(6, static_cast<int64_t>(header.count));
    insert.bind(7, static_cast<int64_t>(header.nan_count));
    const bool any = header.nan_count < header.count;
    if (any) {
      insert.bind(8, header.min);
      insert.bind(9, header.max);
    } else {
      insert.bind(8);
      insert.bind(9);
    }
    insert.bind(10, header.sum);  // a NaN sum (Inf - Inf) binds as NULL
    insert.bind(11, static_cast<int64_t>(header.first_bits));
    insert.bind(12, static_cast<int64_t>(header.last_bits));
    insert.bind(13, data.data(), static_cast<int>(data.size()));
    insert.exec();
    insert.reset();
  }

  SQLite::Statement& seal_statement() { return m_seal; }

 private:
  static void bind(SQLite::Statement& statement, const std::string& run_id, const SeriesKeyRank& series) {
    statement.bind(1, run_id);
    statement.bind(2, static_cast<int64_t>(series.key));
    statement.bind(3, series.rank);
  }

  SQLite::Statement m_last_chunk;
  SQLite::Statement m_last_staged;
  SQLite::Statement m_staged_count;
  SQLite::Statement m_opened;
  SQLite::Statement m_drop_chunk;
  SQLite::Statement m_stage;
  SQLite::Statement m_first_staged;
  SQLite::Statement m_seal;
  SQLite::Statement m_unstage;
};

std::string_view blob(const SQLite::Column& column) {
  return {static_cast<const char*>(column.getBlob()), static_cast<std::size_t>(column.getBytes())};
}

/// Adds `rewrites` to the run's series_rewrites rows.
void add_rewrites(SQLite::Database& db, const std::string& run_id,
                  const std::map<SeriesKeyRank, std::int64_t>& rewrites) {
  if (rewrites.empty()) {
    return;
  }
  SQLite::Statement add(db,
                        "INSERT INTO series_rewrites (run_id, key_id, rank, rewrites) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (run_id, key_id, rank) DO UPDATE SET rewrites = rewrites + excluded.rewrites");
  for (const auto& [series, count] : rewrites) {
    add.bind(1, run_id);
    add.bind(2, static_cast<int64_t>(series.key));
    add.bind(3, series.rank);
    add.bind(4, static_cast<int64_t>(count));
    add.exec();
    add.reset();
  }
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
  SeriesStatements statements(db);
  // The batch by series, in step order; of a step given twice the last value wins.
  std::map<SeriesKeyRank, std::vector<std::pair<std::int64_t, std::uint64_t>>> by_series;
  for (const MetricPoint& point : points) {
    by_series[{keys.at(point.name), point.rank}].emplace_back(point.step, bits_of(point.value));
  }
  for (auto& [series, batch] : by_series) {
    std::stable_sort(batch.begin(), batch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<std::int64_t, std::uint64_t>> kept;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (i + 1 == batch.size() || batch[i + 1].first != batch[i].first) {
        kept.push_back(batch[i]);
      }
    }
    batch = std::move(kept);
  }
  std::map<SeriesKeyRank, std::optional<std::int64_t>> last_before;
  for (const auto& [series, batch] : by_series) {
    const std::int64_t low = batch.front().first;
    const auto sealed = statements.last_chunk(run_id, series);
    const auto staged = statements.last_staged(run_id, series);
    std::optional<std::int64_t> last = staged;
    if (sealed && (!last || sealed->last_step > *last)) {
      last = sealed->last_step;
    }
    last_before[series] = last;
    if (sealed && low <= sealed->last_step) {
      statements.open_from(run_id, series, low);  // steps written again into sealed chunks
    } else if (sealed && !staged && sealed->points < chunk::k_chunk_points) {
      statements.open_from(run_id, series, sealed->last_step);  // a resumed run continues its open chunk
    }
  }
  std::map<SeriesKeyRank, std::int64_t> rewrites;
  for (const MetricPoint& point : points) {
    const SeriesKeyRank series{keys.at(point.name), point.rank};
    const auto& before = last_before.at(series);
    if (before && point.step <= *before) {
      ++rewrites[series];
    }
  }
  add_rewrites(db, run_id, rewrites);
  for (const auto& [series, batch] : by_series) {
    const auto& before = last_before.at(series);
    if (before && batch.front().first <= *before) {
      // Steps written again: replaced in the open chunk (what they fell into is open now).
      statements.stage_all(run_id, series, batch);
      statements.seal(run_id, series);
    } else {
      statements.append(run_id, series, batch);
    }
  }
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
  SQLite::Statement open(db, "SELECT DISTINCT key_id, rank FROM metric_points WHERE run_id = ?");
  open.bind(1, run_id);
  std::vector<SeriesKeyRank> series;
  while (open.executeStep()) {
    series.push_back({open.getColumn(0).getInt64(), open.getColumn(1).getInt()});
  }
  if (series.empty()) {
    return;
  }
  // The run's last chunks are mostly shorter than a page: written in series order, SQLite puts
  // each on the last page or, where it does not fit, on a new one, and 1-2 KiB rows fill pages
  // by about two thirds (the quick start: 10 pages for 7.5 pages of rows). Written packed, fewer.
  SeriesStatements statements(db);
  std::vector<SeriesStatements::Pending> chunks;
  for (const SeriesKeyRank& one : series) {
    statements.take_open(run_id, one, chunks);
  }
  std::vector<std::size_t> cells;
  for (const auto& pending : chunks) {
    cells.push_back(pending.data.size() + run_id.size() + k_chunk_row_bytes);
  }
  const auto page = static_cast<std::size_t>(db.execAndGet("PRAGMA page_size").getInt64());
  for (const std::size_t i : page_packing_order(cells, page)) {
    SeriesStatements::insert_chunk(statements.seal_statement(), run_id, chunks[i]);
  }
}

std::vector<SeriesColumns> read_series(SQLite::Database& db, const std::string& run_id, std::int64_t key,
                                       std::optional<int> rank, std::int64_t after, std::int64_t upto,
                                       std::size_t limit) {
  const ReadSnapshot snapshot(db);
  std::map<int, SeriesColumns> ranks;
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  const auto add = [&](int r, std::int64_t step, std::uint64_t pattern) {
    SeriesColumns& columns = ranks.try_emplace(r, SeriesColumns{r, {}, {}}).first->second;
    if (step > after && step <= upto && columns.steps.size() < limit) {
      columns.steps.push_back(step);
      columns.values.push_back(value_of(pattern));
    }
  };
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
      if (rank && ranks.contains(r) && ranks.at(r).steps.size() >= limit) {
        break;  // one rank's chunks come in step order: the rest are past the limit
      }
      steps.clear();
      bits.clear();
      chunk::decode(blob(chunks.getColumn(1)), steps, bits);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        add(r, steps[i], bits[i]);
      }
    }
  }
  SQLite::Statement staged(db,
                           "SELECT rank, step, bits FROM metric_points WHERE run_id = ?1 AND key_id = ?2 AND "
                           "(?3 IS NULL OR rank = ?3) AND step > ?4 AND step <= ?5 ORDER BY rank, step");
  bind_range(staged);
  while (staged.executeStep()) {
    add(staged.getColumn(0).getInt(), staged.getColumn(1).getInt64(),
        static_cast<std::uint64_t>(staged.getColumn(2).getInt64()));
  }
  std::vector<SeriesColumns> out;
  for (auto& [r, columns] : ranks) {
    if (!columns.steps.empty()) {
      out.push_back(std::move(columns));
    }
  }
  return out;
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

void chunk_metrics_table(SQLite::Database& db) {
  SQLite::Statement rows(db,
                         "SELECT run_id, key_id, rank, step, value FROM metrics ORDER BY run_id, key_id, rank, step");
  SQLite::Statement insert(db,
                           "INSERT INTO metric_chunks (run_id, key_id, rank, first_step, last_step, points, "
                           "nan_points, min_value, max_value, sum_value, first_bits, last_bits, data) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  std::string run_id;
  SeriesKeyRank series{-1, -1};
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  const auto flush = [&] {
    if (!steps.empty()) {
      SeriesStatements::write_chunk(insert, run_id, series, steps, bits);
      steps.clear();
      bits.clear();
    }
  };
  while (rows.executeStep()) {
    const std::string row_run = rows.getColumn(0).getString();
    const SeriesKeyRank row_series{rows.getColumn(1).getInt64(), rows.getColumn(2).getInt()};
    if (row_run != run_id || row_series != series || static_cast<std::int64_t>(steps.size()) == chunk::k_chunk_points) {
      flush();
      run_id = row_run;
      series = row_series;
    }
    steps.push_back(rows.getColumn(3).getInt64());
    bits.push_back(rows.getColumn(4).isNull() ? bits_of(std::numeric_limits<double>::quiet_NaN())
                                              : bits_of(rows.getColumn(4).getDouble()));
  }
  flush();
  db.exec("DROP TABLE metrics");
}

}  // namespace expctl::store::detail
