#pragma once
/// Internal to the store module: the rules of series as chunks (docs/store.md, "Series as
/// chunks"), written once for every backend. Per (run, metric key, rank) the points live in two
/// tables, never both for one step:
///   metric_chunks  sealed chunks (chunk_codec.hpp), one row each with its header;
///   metric_points  the open chunk: one row per point, every step above the series' last sealed
///                  step; the writer appends here and seals k_chunk_points of them at a time.
/// A backend gives the table operations (ChunkTables); write_series and seal_series decide what
/// to seal and what to open again, and the reader helpers below turn rows into points, summaries
/// and envelopes, so SQLite and PostgreSQL follow the same rules by construction.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/types.hpp"

namespace expctl::store::detail {

inline constexpr std::int64_t k_no_step = std::numeric_limits<std::int64_t>::min();
inline constexpr std::int64_t k_last_step = std::numeric_limits<std::int64_t>::max();

/// One (metric key, rank) series of a run.
struct SeriesKeyRank {
  std::int64_t key = 0;
  int rank = 0;
  auto operator<=>(const SeriesKeyRank&) const = default;
};

/// A point as the chunk tables hold it: its step and its value's 64-bit pattern.
using StepBits = std::pair<std::int64_t, std::uint64_t>;

/// Where a series ends before a write: its last sealed chunk and its open points.
struct SeriesTail {
  std::optional<std::int64_t> sealed_last{};  ///< last step of its last sealed chunk
  std::int64_t sealed_points = 0;             ///< points of that chunk
  std::optional<std::int64_t> open_last{};    ///< its last open step
  std::int64_t open_points = 0;               ///< its open points (counted up to k_chunk_points)
};

/// One run's chunk tables inside the caller's transaction, as a backend writes them.
class ChunkTables {
 public:
  virtual ~ChunkTables() = default;
  virtual SeriesTail tail(const SeriesKeyRank& series) = 0;
  /// Deletes the sealed chunks with last_step >= `from` and appends their points, in step order.
  virtual void take_chunks(const SeriesKeyRank& series, std::int64_t from, std::vector<std::int64_t>& steps,
                           std::vector<std::uint64_t>& bits) = 0;
  /// Writes points into the open chunk, replacing points of the same steps.
  virtual void stage(const SeriesKeyRank& series, std::span<const std::int64_t> steps,
                     std::span<const std::uint64_t> bits) = 0;
  /// Appends the first `limit` open points, in step order.
  virtual void first_open(const SeriesKeyRank& series, std::int64_t limit, std::vector<std::int64_t>& steps,
                          std::vector<std::uint64_t>& bits) = 0;
  /// Deletes the open points at or below `upto`.
  virtual void unstage(const SeriesKeyRank& series, std::int64_t upto) = 0;
  virtual void put_chunk(const SeriesKeyRank& series, const chunk::Header& header, std::string_view data) = 0;
  /// A chunk encoded and not written yet.
  struct Pending {
    SeriesKeyRank series;
    chunk::Header header;
    std::string data;
  };
  /// Writes the run's last chunks (seal_open_series), in whatever order suits the store (SQLite:
  /// the order that packs its pages); by default as given.
  virtual void put_last_chunks(std::span<const Pending> chunks) {
    for (const Pending& pending : chunks) {
      put_chunk(pending.series, pending.header, pending.data);
    }
  }
  /// Adds to the series' counts of writes at or below their last step (series_rewrites, which the
  /// shipper reads); a store that is never shipped from keeps none.
  virtual void add_rewrites(const std::map<SeriesKeyRank, std::int64_t>& rewrites) = 0;
  /// The series that have open points.
  virtual std::vector<SeriesKeyRank> open_series() = 0;
};

/// Writes `points` (each series' points in the order given; of a step given twice the last value
/// wins) into their open chunks: counts the writes at or below a series' last step, opens again
/// the sealed chunks a point falls into (a resume re-logging steps), a run whose last chunk was
/// sealed short continues it, and every series whose open chunk reached k_chunk_points is sealed.
void write_series(ChunkTables& tables, std::map<SeriesKeyRank, std::vector<StepBits>> points);

/// Seals every open chunk of the run (it ended): its series are chunks only afterwards. The chunks
/// are encoded first and written together (ChunkTables::put_last_chunks).
void seal_open_series(ChunkTables& tables);

/// A chunk row's header as the readers use it (min and max absent when every value is NaN; sum
/// NaN where the store holds NULL).
struct ChunkHead {
  int rank = 0;
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::int64_t points = 0;
  std::int64_t nan_points = 0;
  std::optional<double> min{};
  std::optional<double> max{};
  double sum = 0.0;
  std::uint64_t first_bits = 0;
  std::uint64_t last_bits = 0;
};

/// Collects a read of series points (chunks then open points, each rank in step order) into
/// columns per rank: only steps in (after, upto], at most `limit` a rank.
class SeriesCollector {
 public:
  SeriesCollector(std::int64_t after, std::int64_t upto, std::size_t limit)
      : m_after(after), m_upto(upto), m_limit(limit) {}
  /// Whether `rank` has its `limit` points already (its later chunks need not be decoded).
  bool full(int rank) const;
  void add_chunk(int rank, std::string_view data);
  void add(int rank, std::int64_t step, std::uint64_t bits);
  /// The ranks with points, in rank order.
  std::vector<SeriesColumns> take();

 private:
  std::int64_t m_after;
  std::int64_t m_upto;
  std::size_t m_limit;
  std::map<int, SeriesColumns> m_ranks;
  std::vector<std::int64_t> m_steps;
  std::vector<std::uint64_t> m_bits;
};

/// Builds series_aggregates: whole chunks from their headers, points one by one.
class AggregateCollector {
 public:
  void add_head(const ChunkHead& head);
  void add_chunk(int rank, std::string_view data, std::int64_t after_step);
  void add(int rank, std::int64_t step, double value);
  std::vector<SeriesAggregate> take() const;

 private:
  std::pair<SeriesAggregate, bool>& of(int rank);
  std::map<int, std::pair<SeriesAggregate, bool>> m_ranks;  ///< rank -> (aggregate, has a value)
};

/// Builds metric_series from per (name, rank) parts: the sealed chunks' and the open points'
/// counts, first and last step with their values' patterns.
class SeriesInfoCollector {
 public:
  void add(const std::string& name, int rank, std::int64_t points, std::int64_t first_step, std::uint64_t first_bits,
           std::int64_t last_step, std::uint64_t last_bits);
  std::vector<MetricSeriesInfo> take() const;

 private:
  struct Part {
    std::int64_t points = 0;
    std::int64_t first_step = 0;
    std::uint64_t first_bits = 0;
    std::int64_t last_step = 0;
    std::uint64_t last_bits = 0;
  };
  std::map<std::pair<std::string, int>, Part> m_parts;
};

/// recent_metrics' walk back through a rank's sealed chunks, newest first: decodes `data` and
/// appends its points from the newest on to `points` (newest first) until it holds `count`.
void append_newest(std::string_view data, int rank, const std::string& name, std::size_t count,
                   std::vector<MetricPoint>& points);

/// Reads one rank's points in (after, upto].
using PointsBetween = std::function<SeriesColumns(int rank, std::int64_t after, std::int64_t upto)>;

/// series_envelope from the chunk headers of the steps in (`after_step`, `upto_step`] (`heads`:
/// every rank's chunks that hold such steps, by rank then step) and each rank's count of open
/// points in that range: where a bucket spans k_chunk_points or more, whole chunks make buckets
/// from their headers alone; a finer bucketing, the chunks `after_step` and `upto_step` fall in and
/// the open points are read through `points`.
std::vector<SeriesEnvelope> envelope_from_heads(std::span<const ChunkHead> heads,
                                                const std::map<int, std::int64_t>& open, std::size_t buckets,
                                                std::int64_t after_step, std::int64_t upto_step,
                                                const PointsBetween& points);

}  // namespace expctl::store::detail
