#pragma once
/// Internal to the store module: a SQLite store's series as chunks (schema v8), by the rules of
/// series_chunks.hpp (which PostgreSQL follows too). Every reader of points goes through these
/// functions, so none needs to know the split between sealed chunks and open points.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "expctl/store/series_chunks.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/types.hpp"

namespace expctl::store::detail {

/// One read transaction over the statements of a reader, unless the connection is in one already:
/// a series is read from two tables, and a writer sealing its open points between the two
/// statements would otherwise hide them from both.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(SQLite::Database& db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  SQLite::Database& m_db;
  bool m_began = false;
};

/// Writes `points` of a run (metric names already keyed in `keys`) into its open chunks in the
/// caller's transaction: counts the writes at or below a series' last step (series_rewrites),
/// opens again the sealed chunks a point falls into (a resume re-logging steps), replaces points
/// given again, and seals every series whose open chunk reached k_chunk_points.
void write_points(SQLite::Database& db, const std::string& run_id, const std::map<std::string, std::int64_t>& keys,
                  std::span<const MetricPoint> points);

/// Seals every open chunk of the run (the run ended): its series are chunks only afterwards. The
/// chunk rows are written in page_packing_order.
void seal_run(SQLite::Database& db, const std::string& run_id);

/// What a metric_chunks row costs in a page beside its data and run id (its other columns, record
/// and cell headers, cell pointer: about 61 bytes, from dbstat), and a leaf page's header.
inline constexpr std::size_t k_chunk_row_bytes = 64;
inline constexpr std::size_t k_leaf_header_bytes = 8;

/// The order to insert rows of `cells` bytes each into a table whose pages hold `page` bytes, so
/// that SQLite (which appends a row to the last leaf page, or where it does not fit there to a new
/// one) fills its pages: first-fit decreasing, then page by page. Rows larger than a page come
/// first, in their order.
std::vector<std::size_t> page_packing_order(std::span<const std::size_t> cells, std::size_t page);

/// The points of series `key` (of every rank, or of `rank`) with after < step <= upto, per rank in
/// rank order, at most `limit` per rank.
std::vector<SeriesColumns> read_series(SQLite::Database& db, const std::string& run_id, std::int64_t key,
                                       std::optional<int> rank, std::int64_t after = k_no_step,
                                       std::int64_t upto = k_last_step,
                                       std::size_t limit = std::numeric_limits<std::size_t>::max());

/// The run's series, by key then rank.
std::vector<SeriesKeyRank> run_series(SQLite::Database& db, const std::string& run_id);

/// How many points of the run (of one series when `series` is given) have step > `after`.
std::int64_t count_points(SQLite::Database& db, const std::string& run_id, std::optional<SeriesKeyRank> series,
                          std::int64_t after = k_no_step);

/// Inserts sealed chunks made elsewhere (chunk::summarize and chunk::encode of each) into series
/// `series` of the run, in the caller's transaction, steps ascending and above the series' points,
/// through the writer's own chunk insert: bench/store's generator of large stores encodes them on
/// several threads (store/testing.hpp).
void insert_sealed_chunks(SQLite::Database& db, const std::string& run_id, const SeriesKeyRank& series,
                          std::span<const std::pair<chunk::Header, std::string>> chunks);

/// The key of metric `name`, made when missing, in the caller's transaction.
std::int64_t metric_key(SQLite::Database& db, const std::string& name);

/// The migration to v8: every row of the row-per-point `metrics` table of schema v4-v7 into sealed
/// chunks (a NaN stored as NULL becomes the quiet NaN), then the table is dropped.
void chunk_metrics_table(SQLite::Database& db);

}  // namespace expctl::store::detail
