#include "expctl/tensorboard/export.hpp"

#include <algorithm>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "expctl/util/metric_names.hpp"

namespace expctl::tensorboard {
namespace {

/// One rank's points of one metric, with a cursor for the step-by-step replay.
struct Column {
  const std::string* name = nullptr;
  const store::SeriesColumns* points = nullptr;
  std::size_t next = 0;
};

/// Every series of a run, each as one column per rank.
struct RunSeries {
  std::vector<std::pair<std::string, std::vector<store::SeriesColumns>>> series;
  std::vector<Column> columns;  // ordered by rank, then name
};

RunSeries read_series(const store::Store& store, const std::string& run_id) {
  RunSeries run;
  for (const store::MetricSeriesInfo& info : store.metric_series(run_id)) {
    run.series.emplace_back(info.name, store.series_columns(run_id, info.name));
  }
  for (const auto& [name, ranks] : run.series) {
    for (const store::SeriesColumns& points : ranks) {
      run.columns.push_back({&name, &points, 0});
    }
  }
  std::stable_sort(run.columns.begin(), run.columns.end(),
                   [](const Column& a, const Column& b) { return a.points->rank < b.points->rank; });
  return run;
}

std::vector<std::int64_t> all_steps(const std::vector<Column>& columns) {
  std::vector<std::int64_t> steps;
  for (const Column& column : columns) {
    steps.insert(steps.end(), column.points->steps.begin(), column.points->steps.end());
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

/// Ranks that logged step times: the ranks a job point waits for.
int job_world_size(const RunSeries& run) {
  for (const auto& [name, ranks] : run.series) {
    if (name == util::metric::step_time_ms) {
      return static_cast<int>(ranks.size());
    }
  }
  return 0;
}

/// Every rank's points of `step`, ranks in order (as the recorder would have delivered them).
void points_of_step(std::vector<Column>& columns, std::int64_t step, std::vector<store::MetricPoint>& batch) {
  batch.clear();
  for (Column& column : columns) {
    const store::SeriesColumns& points = *column.points;
    if (column.next < points.steps.size() && points.steps[column.next] == step) {
      batch.push_back({points.rank, step, *column.name, points.values[column.next]});
      ++column.next;
    }
  }
}

ExportedRun export_run(const store::Store& store, const store::RunRecord& run, const std::filesystem::path& out) {
  RunSeries series = read_series(store, run.id);
  LiveExport live(out, run, {.world_size = job_world_size(series)});
  std::vector<store::MetricPoint> batch;
  for (const std::int64_t step : all_steps(series.columns)) {
    points_of_step(series.columns, step, batch);
    live.on_points(batch);
  }
  live.finish();
  return {run.id, live.run_dir(), live.files()};
}

std::vector<std::filesystem::path> event_files_under(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file() && is_event_file_name(it->path().filename().string())) {
      files.push_back(it->path());
    }
  }
  return files;
}

void clear_or_refuse(const std::filesystem::path& dir, bool overwrite) {
  for (const std::filesystem::path& file : event_files_under(dir)) {
    if (!overwrite) {
      throw ExportError(fmt::format("{} holds TensorBoard event files already ({}): pass --overwrite to replace them, "
                                    "or export to another folder",
                                    dir.string(), file.filename().string()),
                        util::ExitCode::usage);
    }
    std::error_code error;
    std::filesystem::remove(file, error);
    EXPCTL_CHECK(!error, ExportError, "cannot remove the earlier TensorBoard event file {}: {}", file.string(),
                 error.message());
  }
}

/// A rank's step times up to `last_step`, summed as LiveExport sums them (in step order, finite
/// positive values only), so the result is the same double.
double elapsed_until(const store::SeriesColumns& times, std::int64_t last_step) {
  double elapsed = 0.0;
  for (std::size_t i = 0; i < times.steps.size() && times.steps[i] <= last_step; ++i) {
    elapsed += std::isfinite(times.values[i]) && times.values[i] > 0.0 ? times.values[i] : 0.0;
  }
  return elapsed;
}

}  // namespace

LiveOptions resumed_options(const store::Store& store, const std::string& run_id, std::int64_t resumed_from,
                            int world_size) {
  LiveOptions options{.world_size = world_size, .resumed_from = resumed_from, .elapsed_ms = {}};
  for (const store::SeriesColumns& times : store.series_columns(run_id, util::metric::step_time_ms)) {
    options.elapsed_ms[times.rank] = elapsed_until(times, resumed_from);
  }
  return options;
}

std::int64_t ExportedRun::points() const {
  std::int64_t total = 0;
  for (const WrittenFile& file : files) {
    total += file.points;
  }
  return total;
}

std::vector<ExportedRun> export_runs(const store::Store& store, const std::vector<store::RunRecord>& runs,
                                     const std::filesystem::path& out, const ExportOptions& options) {
  for (const store::RunRecord& run : runs) {
    // Each run's folder under `out` is named by its id: one outside the grammar would name a
    // folder elsewhere (store::Store reads leave such rows out; this holds for any caller).
    EXPCTL_CHECK(store::is_run_id(run.id), ExportError, "{}", store::invalid_run_id_text(run.id, "export"));
    clear_or_refuse(out / run.id, options.overwrite);
  }
  std::vector<ExportedRun> exported;
  for (const store::RunRecord& run : runs) {
    const bool seen = std::any_of(exported.begin(), exported.end(), [&](const auto& done) { return done.run_id == run.id; });
    if (!seen) {
      exported.push_back(export_run(store, run, out));
    }
  }
  return exported;
}

}  // namespace expctl::tensorboard
