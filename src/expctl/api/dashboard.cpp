#include "expctl/api/dashboard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "expctl/api/runs.hpp"

namespace expctl::api {

namespace {

// A value to 6 significant digits (what a chart can show): a third of the bytes of 17 digits.
nlohmann::json short_number(double value) {
  if (!std::isfinite(value)) {
    return nullptr;  // NaN and inf have no JSON spelling; the chart leaves a gap
  }
  return std::strtod(fmt::format("{:.6g}", value).c_str(), nullptr);
}

bool before(const store::RunRecord& x, const store::RunRecord& y, RunsSort sort) {
  switch (sort) {
    case RunsSort::name:
      return std::tie(x.name, x.id) < std::tie(y.name, y.id);
    case RunsSort::status:
      return std::pair(store::to_string(x.status), x.id) < std::pair(store::to_string(y.status), y.id);
    case RunsSort::duration: {
      const double dx = x.duration_seconds().value_or(-1.0);
      const double dy = y.duration_seconds().value_or(-1.0);
      return dx != dy ? dx < dy : x.id < y.id;
    }
    case RunsSort::started:
      break;
  }
  return std::tie(x.started_at, x.id) < std::tie(y.started_at, y.id);
}

nlohmann::json metric_cell(const store::Store& store, const std::string& run_id, const RunsQuery& query) {
  if (query.aggregate == Aggregate::last) {
    const auto points = store.recent_metrics(run_id, query.metric, 0, 1);
    return points.empty() ? nlohmann::json(nullptr) : short_number(points.back().value);
  }
  std::optional<double> result;
  for (const auto& rank : store.series_aggregates(run_id, query.metric)) {
    if (rank.count == 0) {
      continue;
    }
    const double value = query.aggregate == Aggregate::min ? rank.min : rank.max;
    result = !result ? value : query.aggregate == Aggregate::min ? std::min(*result, value) : std::max(*result, value);
  }
  return result ? short_number(*result) : nlohmann::json(nullptr);
}

// Seconds of step time through each of `steps` (ascending), from the rank's step_time_ms points.
std::vector<double> wall_seconds(const std::vector<std::int64_t>& steps, const store::SeriesColumns* times,
                                 double offset_ms) {
  std::vector<double> wall(steps.size(), 0.0);
  double sum = offset_ms;
  std::size_t at = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    while (times != nullptr && at < times->steps.size() && times->steps[at] <= steps[i]) {
      const double value = times->values[at];
      sum += std::isfinite(value) ? value : 0.0;
      ++at;
    }
    wall[i] = std::round(sum) / 1000.0;  // to the millisecond
  }
  return wall;
}

}  // namespace

nlohmann::json runs_page(const store::Store& store, const RunsQuery& query) {
  store::RunFilter filter;
  filter.status = query.status;
  if (!query.tag.empty()) {
    filter.tag = query.tag;
  }
  filter.spec_hash_prefix = query.spec_prefix;
  std::vector<store::RunRecord> runs = store.list_runs(filter);
  if (!query.name.empty()) {
    std::erase_if(runs, [&](const store::RunRecord& run) { return run.name.find(query.name) == std::string::npos; });
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const store::RunRecord& x, const store::RunRecord& y) {
    return query.descending ? before(y, x, query.sort) : before(x, y, query.sort);
  });
  const std::size_t limit = std::clamp<std::size_t>(query.limit, 1, k_max_page_rows);
  const std::size_t offset = std::min(query.offset, runs.size());
  nlohmann::json document = json_envelope("runs-page");
  document["total"] = runs.size();
  document["offset"] = offset;
  document["limit"] = limit;
  document["metric"] = query.metric.empty() ? nlohmann::json(nullptr) : nlohmann::json(query.metric);
  document["runs"] = nlohmann::json::array();
  for (std::size_t i = offset; i < runs.size() && i < offset + limit; ++i) {
    nlohmann::json row = run_json(runs[i]);
    row.erase("run_dir");  // a path on the server's disk: nothing a page needs
    if (!query.metric.empty()) {
      row["metric"] = metric_cell(store, runs[i].id, query);
    }
    document["runs"].push_back(std::move(row));
  }
  return document;
}

void downsample(const std::vector<std::int64_t>& steps, const std::vector<double>& values, std::size_t budget,
                std::vector<std::size_t>& kept) {
  kept.clear();
  const std::size_t n = steps.size();
  if (n <= budget) {
    for (std::size_t i = 0; i < n; ++i) {
      kept.push_back(i);
    }
    return;
  }
  const std::size_t buckets = std::max<std::size_t>(1, budget / 3);
  const std::size_t size = (n + buckets - 1) / buckets;
  for (std::size_t start = 0; start < n; start += size) {
    const std::size_t end = std::min(n, start + size);
    std::size_t low = end - 1;
    std::size_t high = end - 1;
    for (std::size_t i = start; i < end; ++i) {
      const double value = values[i];
      if (!std::isfinite(value)) {
        continue;
      }
      if (!std::isfinite(values[low]) || value < values[low]) {
        low = i;
      }
      if (!std::isfinite(values[high]) || value > values[high]) {
        high = i;
      }
    }
    std::size_t picks[3] = {low, high, end - 1};
    std::sort(std::begin(picks), std::end(picks));
    for (std::size_t i = 0; i < 3; ++i) {
      if (i == 0 || picks[i] != picks[i - 1]) {
        kept.push_back(picks[i]);
      }
    }
  }
}

nlohmann::json series_document(const store::Store& store, const SeriesQuery& query) {
  const std::int64_t after = query.after_step.value_or(std::numeric_limits<std::int64_t>::min());
  const auto columns = store.series_columns(query.run_id, query.metric, after);
  std::vector<store::SeriesColumns> times;
  std::vector<store::SeriesAggregate> times_total;
  std::vector<store::SeriesAggregate> times_after;
  if (query.x == XAxis::wall) {
    times = store.series_columns(query.run_id, "step_time_ms", after);
    if (query.after_step) {
      times_total = store.series_aggregates(query.run_id, "step_time_ms");
      times_after = store.series_aggregates(query.run_id, "step_time_ms", after);
    }
  }
  const std::size_t budget = std::clamp<std::size_t>(query.points, 3, k_max_series_points);
  nlohmann::json document = json_envelope("series");
  document["run"] = query.run_id;
  document["metric"] = query.metric;
  document["x"] = query.x == XAxis::wall ? "wall" : "step";
  nlohmann::json seq = query.after_step ? nlohmann::json(*query.after_step) : nlohmann::json(nullptr);
  document["ranks"] = nlohmann::json::array();
  std::vector<std::size_t> kept;
  for (const auto& rank : columns) {
    downsample(rank.steps, rank.values, budget, kept);
    nlohmann::json xs = nlohmann::json::array();
    nlohmann::json ys = nlohmann::json::array();
    std::vector<double> wall;
    if (query.x == XAxis::wall) {
      const auto same_rank = [&](const auto& item) { return item.rank == rank.rank; };
      const auto own = std::find_if(times.begin(), times.end(), same_rank);
      double offset_ms = 0.0;  // the step time before `after`: all of it minus what comes after
      const auto total = std::find_if(times_total.begin(), times_total.end(), same_rank);
      const auto later = std::find_if(times_after.begin(), times_after.end(), same_rank);
      if (total != times_total.end()) {
        offset_ms = total->sum - (later != times_after.end() ? later->sum : 0.0);
      }
      wall = wall_seconds(rank.steps, own != times.end() ? &*own : nullptr, offset_ms);
    }
    for (const std::size_t i : kept) {
      xs.push_back(query.x == XAxis::wall ? nlohmann::json(wall[i]) : nlohmann::json(rank.steps[i]));
      ys.push_back(short_number(rank.values[i]));
    }
    if (!rank.steps.empty() && (seq.is_null() || rank.steps.back() > seq.get<std::int64_t>())) {
      seq = rank.steps.back();
    }
    document["ranks"].push_back({{"rank", rank.rank},
                                 {"points", rank.steps.size()},
                                 {"downsampled", kept.size() < rank.steps.size()},
                                 {"x", std::move(xs)},
                                 {"y", std::move(ys)}});
  }
  document["seq"] = seq;
  return document;
}

std::string series_csv(const nlohmann::json& series) {
  std::string csv = fmt::format("rank,{},{}\n", series.value("x", "step"), series.value("metric", "value"));
  for (const auto& rank : series.at("ranks")) {
    const auto& xs = rank.at("x");
    const auto& ys = rank.at("y");
    for (std::size_t i = 0; i < xs.size() && i < ys.size(); ++i) {
      csv += fmt::format("{},{},{}\n", rank.at("rank").get<int>(), xs[i].dump(), ys[i].is_null() ? "nan" : ys[i].dump());
    }
  }
  return csv;
}

std::optional<std::string> log_tail(const store::Store& store, const store::RunRecord& run, int rank,
                                    std::size_t max_bytes, const FolderAccess& folder) {
  if (rank < 0) {
    return std::nullopt;
  }
  const auto file = run_folder_file(store, run, fmt::format("logs/rank-{}.log", rank), folder);
  if (!file) {
    return std::nullopt;
  }
  std::ifstream in(*file, std::ios::binary | std::ios::ate);
  if (!in) {
    return std::nullopt;
  }
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace expctl::api
