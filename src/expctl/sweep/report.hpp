#pragma once
/// Results across a sweep's points (`expctl sweep FILE --report`): one row per configuration
/// (the points that differ only in their seed are replicates of one configuration), the axes as
/// columns, each metric's median over the configuration's completed runs with its run-to-run
/// spread (the robust Huber scale of compare/statistics.hpp), and the best configuration per
/// metric. Text, JSON, Markdown, or one self-contained HTML file with a plot of each metric
/// against each numeric axis. Pure functions of the runs they are given.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/thresholds.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/types.hpp"
#include "expctl/sweep/array_progress.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::sweep {

/// Version of the report's JSON shape (kind "sweep-report").
inline constexpr int k_report_json_version = 1;

/// The metrics a report shows when none are asked for (those that some run has).
inline constexpr std::string_view k_default_metrics[] = {util::summary_key::final_train_loss,
                                                         util::summary_key::eval_loss, util::summary_key::eval_accuracy,
                                                         util::summary_key::samples_per_sec};

/// One metric over a set of runs.
struct Cell {
  std::vector<double> values;  ///< one per run that has the metric
  double median = 0;           ///< NaN when there is no value
  double spread = 0;           ///< NaN below two values
};

/// Points that differ only in replicate axes (the seed).
struct Configuration {
  std::vector<nlohmann::json> axes;  ///< values of Report::axes
  std::vector<size_t> points;
  std::vector<std::string> runs;     ///< completed run ids
  std::vector<Cell> cells;           ///< one per Report::metrics
};

struct PointResult {
  size_t index = 0;
  std::string hash;
  std::vector<std::string> runs;  ///< completed run ids
  std::vector<Cell> cells;
};

struct Best {
  std::string metric;
  size_t metric_index = 0;  ///< into Report::metrics
  compare::Direction direction = compare::Direction::lower_is_better;
  size_t configuration = 0;
};

struct Report {
  std::string name;
  std::string hash;
  std::string file;
  std::vector<std::string> axes;     ///< the non-replicate axes
  bool replicates = false;           ///< a seeds axis or repeat > 1
  std::vector<std::string> metrics;
  std::vector<Configuration> configurations;
  std::vector<PointResult> points;
  std::vector<Best> best;            ///< per metric with a known direction and a value
  size_t runs_expected = 0;
  /// Points a submitted Slurm array holds, not merged yet (the caller's, from array_progress.hpp).
  std::vector<ArrayPoint> array;
};

/// `runs[i]` holds the completed runs of point i. `metrics` empty: k_default_metrics present in any run.
Report build_report(const Sweep& sweep, std::span<const std::vector<store::RunRecord>> runs,
                    std::vector<std::string> metrics);

/// The completed runs of each point, in point order: the `runs` build_report takes.
std::vector<std::vector<store::RunRecord>> completed_runs(const Sweep& sweep, const store::Store& store);

/// The direction of a metric: compare's table, else by name (loss/time lower, accuracy/per_sec higher).
std::optional<compare::Direction> metric_direction(std::string_view metric);

std::string render_text(const Report& report);
std::string render_markdown(const Report& report);
nlohmann::json to_json(const Report& report);
/// Plots carry ids "plot-<metric>-<axis>" (characters other than [A-Za-z0-9_-] as '-').
std::string render_html(const Report& report);

/// The report in one of "text", "json", "markdown", "html" (anything else: text).
std::string render(const Report& report, std::string_view format);

/// The report across the sweep's points in `format`, from `store`'s completed runs.
std::string report_of(const Sweep& sweep, const store::Store& store, const std::vector<std::string>& metrics,
                      const std::string& format);

}  // namespace expctl::sweep
