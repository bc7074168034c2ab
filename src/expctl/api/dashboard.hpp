#pragma once
/// The documents only `expctl serve` answers: a page of the runs table (filtered, sorted, paged
/// by the server) and a metric series downsampled for a chart. Plain functions of a store and a
/// parsed query, so they are tested without a socket.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/api/run_folder.hpp"
#include "expctl/store/run_query.hpp"
#include "expctl/store/store.hpp"

namespace expctl::api {

/// The most rows one runs page holds, and the most points one rank's series sends.
inline constexpr std::size_t k_max_page_rows = 200;
inline constexpr std::size_t k_max_series_points = 5000;

/// The runs table's orders are the store's (store::RunSort: the database sorts).
using RunsSort = store::RunSort;

/// A metric column of the runs table: last, min or max of a series (rank 0 for last).
enum class Aggregate { last, min, max };

/// "last", "min" or "max".
std::string_view to_string(Aggregate aggregate);
std::optional<Aggregate> parse_aggregate(std::string_view text);

/// One metric column: `aggregate` of series `metric` per run.
struct MetricColumn {
  std::string metric;
  Aggregate aggregate = Aggregate::last;
};
/// The most metric columns one runs page computes (each is one query per row).
inline constexpr std::size_t k_max_metric_columns = 8;

struct RunsQuery {
  std::optional<store::RunStatus> status;
  std::string tag;          ///< exact tag; empty: any
  std::string name;         ///< substring of the name; empty: any
  std::string spec_prefix;  ///< lowercase hex prefix of the spec hash; empty: any
  RunsSort sort = RunsSort::started;
  bool descending = true;
  std::size_t offset = 0;
  std::size_t limit = 50;  ///< capped at k_max_page_rows
  std::vector<MetricColumn> columns;  ///< metric columns the user chose, at most k_max_metric_columns
};

/// {"format_version", "kind": "runs-page", "total", "offset", "limit", "columns": [{"metric", "agg"}],
///  "runs": [run_json + "metrics": one value (or null) per column]}.
nlohmann::json runs_page(const store::Store& store, const RunsQuery& query);

enum class XAxis { step, wall };

struct SeriesQuery {
  std::string run_id;  ///< an exact run id
  std::string metric;
  XAxis x = XAxis::step;
  std::size_t points = 1000;  ///< the most points per rank (capped at k_max_series_points)
  /// Only steps after this one (a live page's sequence number: the last step it holds).
  std::optional<std::int64_t> after_step;
  /// Only steps in [from_step, to_step]: a zoomed chart asks for its visible range again, and
  /// gets it at full resolution when it fits in `points`.
  std::optional<std::int64_t> from_step;
  std::optional<std::int64_t> to_step;
};

/// {"kind": "series", "run", "metric", "x": "step"|"wall", "seq": last step sent (or the query's
/// after_step), "ranks": [{"rank", "points" (stored), "downsampled", "x": [...], "y": [...]}]}.
/// A rank with more points than fit is cut into buckets of consecutive steps, and each bucket
/// sends its minimum, maximum and last point in step order, so a one-step spike stays visible.
/// On the step axis, where a bucket spans a stored chunk or more, the buckets come from the chunks'
/// headers (Store::series_envelope: no point decoded) and each is drawn as its two extremes at its
/// first and middle step and its last value at its last step (docs/serve.md, "Long series").
/// "wall" is the seconds of step time since the run's first step (the sum of step_time_ms).
nlohmann::json series_document(const store::Store& store, const SeriesQuery& query);

/// Where one rank's step time went, over the run: the steps cut into at most `buckets` runs of
/// consecutive steps, and per bucket each timed phase's share of the step time (sum of the
/// phase's ms over sum of step_time_ms, so a bucket's shares add up as the steps' do).
/// {"kind": "phase-shares", "run", "rank", "ranks": [ranks that stored step times], "x": "step"|
/// "wall", "at": [last step (or wall second) of each bucket], "steps": points read, "measured":
/// whether the rank timed any phase, "phases": {"data": [...], "forward", "backward", "comm",
/// "optimizer", "other"}} — a phase the rank never timed is null (not 0 %), "other" only when
/// every phase was timed.
struct PhaseSharesQuery {
  std::string run_id;
  int rank = 0;
  XAxis x = XAxis::step;
  std::size_t buckets = 300;  ///< capped at k_max_series_points / 3
};
nlohmann::json phase_shares_document(const store::Store& store, const PhaseSharesQuery& query);

/// {"kind": "metric-names", "run", "names": [...]}: the run's series by name (Store::metric_names:
/// no point is read), what a run page lays its charts out by before it reads any.
nlohmann::json metric_names_document(const store::Store& store, const std::string& run_id);

/// The same points as CSV: "rank,step,x,value" lines under a header (exact when they fit).
std::string series_csv(const nlohmann::json& series);

/// The last `max_bytes` of a rank's log (logs/rank-N.log in the run folder) as text, or nullopt
/// when `folder` does not allow it or there is none.
std::optional<std::string> log_tail(const store::Store& store, const store::RunRecord& run, int rank,
                                    std::size_t max_bytes, const FolderAccess& folder);

/// Downsamples one rank's points (steps ascending) to at most about `budget` points: min, max and
/// last of each bucket of consecutive points, in step order. Exact when they fit.
void downsample(const std::vector<std::int64_t>& steps, const std::vector<double>& values, std::size_t budget,
                std::vector<std::size_t>& kept);

}  // namespace expctl::api
