#include "expctl/api/dashboard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "expctl/api/runs.hpp"
#include "expctl/store/chunk_codec.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::api {

namespace {

// A value to 6 significant digits (what a chart can show): a third of the bytes of 17 digits.
nlohmann::json short_number(double value) {
  if (!std::isfinite(value)) {
    return nullptr;  // NaN and inf have no JSON spelling; the chart leaves a gap
  }
  return std::strtod(fmt::format("{:.6g}", value).c_str(), nullptr);
}

nlohmann::json metric_cell(const store::Store& store, const std::string& run_id, const MetricColumn& column) {
  if (column.aggregate == Aggregate::last) {
    const auto points = store.recent_metrics(run_id, column.metric, 0, 1);
    return points.empty() ? nlohmann::json(nullptr) : short_number(points.back().value);
  }
  std::optional<double> result;
  for (const auto& rank : store.series_aggregates(run_id, column.metric)) {
    if (rank.count == 0) {
      continue;
    }
    const double value = column.aggregate == Aggregate::min ? rank.min : rank.max;
    result = !result ? value : column.aggregate == Aggregate::min ? std::min(*result, value) : std::max(*result, value);
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

std::string_view to_string(Aggregate aggregate) {
  switch (aggregate) {
    case Aggregate::min:
      return "min";
    case Aggregate::max:
      return "max";
    case Aggregate::last:
      break;
  }
  return "last";
}

std::optional<Aggregate> parse_aggregate(std::string_view text) {
  for (const Aggregate aggregate : {Aggregate::last, Aggregate::min, Aggregate::max}) {
    if (text == to_string(aggregate)) {
      return aggregate;
    }
  }
  return std::nullopt;
}

nlohmann::json runs_page(const store::Store& store, const RunsQuery& query) {
  store::RunQuery filter;
  filter.status = query.status;
  if (!query.tag.empty()) {
    filter.tag = query.tag;
  }
  filter.name_contains = query.name;
  filter.spec_hash_prefix = query.spec_prefix;
  filter.sort = query.sort;
  filter.descending = query.descending;
  filter.limit = std::clamp<std::size_t>(query.limit, 1, k_max_page_rows);
  filter.offset = query.offset;
  // The database filters, counts, sorts and pages: only this page's rows are read.
  const store::RunPage page = store::query_runs(store, filter);
  nlohmann::json document = json_envelope("runs-page");
  document["total"] = page.total;
  document["offset"] = std::min<std::size_t>(query.offset, static_cast<std::size_t>(page.total));
  document["limit"] = filter.limit;
  document["columns"] = nlohmann::json::array();
  const std::size_t columns = std::min(query.columns.size(), k_max_metric_columns);
  for (std::size_t c = 0; c < columns; ++c) {
    document["columns"].push_back(
        {{"metric", query.columns[c].metric}, {"agg", to_string(query.columns[c].aggregate)}});
  }
  document["runs"] = nlohmann::json::array();
  for (const store::RunRecord& run : page.runs) {
    nlohmann::json row = run_json(run);
    row.erase("run_dir");  // a path on the server's disk: nothing a page needs
    if (columns > 0) {
      nlohmann::json& cells = row["metrics"] = nlohmann::json::array();
      for (std::size_t c = 0; c < columns; ++c) {
        cells.push_back(metric_cell(store, run.id, query.columns[c]));
      }
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

namespace {

// Whether a bucket of the chart (budget / 3 of them per rank, as downsample cuts) spans a stored
// chunk or more for some rank over the steps in (after, upto]: then the chunks' headers draw it.
bool coarser_than_chunk(const store::Store& store, const SeriesQuery& query, std::int64_t after, std::int64_t upto,
                        std::size_t buckets) {
  const auto beyond = upto == std::numeric_limits<std::int64_t>::max()
                          ? std::vector<store::SeriesAggregate>{}
                          : store.series_aggregates(query.run_id, query.metric, upto);
  for (const store::SeriesAggregate& rank : store.series_aggregates(query.run_id, query.metric, after)) {
    std::int64_t points = rank.count + rank.nan_count;
    for (const store::SeriesAggregate& later : beyond) {
      points -= later.rank == rank.rank ? later.count + later.nan_count : 0;
    }
    if ((points + static_cast<std::int64_t>(buckets) - 1) / static_cast<std::int64_t>(buckets) >=
        store::chunk::k_chunk_points) {
      return true;
    }
  }
  return false;
}

// One rank's series from Store::series_envelope: its buckets merged down to `buckets` at most, each
// drawn as three points at its first, middle and last step: the extreme the bucket starts nearer
// to first (its maximum when its last value is nearer its minimum: a falling stretch), then the
// other, then its last value. Where in the bucket the extremes were is not stored.
nlohmann::json envelope_rank(const store::SeriesEnvelope& envelope, std::size_t buckets, nlohmann::json& seq) {
  std::vector<store::SeriesBucket> merged;
  const std::size_t n = envelope.buckets.size();
  const std::size_t k = std::min(n, buckets);
  std::int64_t points = 0;
  for (std::size_t j = 0; j < k; ++j) {  // output bucket j merges input buckets [j n / k, (j + 1) n / k)
    store::SeriesBucket bucket = envelope.buckets[j * n / k];
    for (std::size_t i = j * n / k + 1; i < (j + 1) * n / k; ++i) {
      const store::SeriesBucket& next = envelope.buckets[i];
      bucket.min = std::isnan(bucket.min) ? next.min
                   : std::isnan(next.min) ? bucket.min
                                          : std::min(bucket.min, next.min);
      bucket.max = std::isnan(bucket.max) ? next.max
                   : std::isnan(next.max) ? bucket.max
                                          : std::max(bucket.max, next.max);
      bucket.last_step = next.last_step;
      bucket.points += next.points;
      bucket.last = next.last;
    }
    points += bucket.points;
    merged.push_back(bucket);
  }
  nlohmann::json xs = nlohmann::json::array();
  nlohmann::json ys = nlohmann::json::array();
  const auto add = [&](std::int64_t step, double value) {
    if (xs.empty() || xs.back().get<std::int64_t>() != step) {
      xs.push_back(step);
      ys.push_back(short_number(value));
    }
  };
  for (const store::SeriesBucket& bucket : merged) {
    if (!std::isnan(bucket.min)) {
      const bool falling =
          std::isnan(bucket.last) || std::abs(bucket.last - bucket.min) <= std::abs(bucket.last - bucket.max);
      add(bucket.first_step, falling ? bucket.max : bucket.min);
      add(bucket.first_step + (bucket.last_step - bucket.first_step) / 2, falling ? bucket.min : bucket.max);
    }
    add(bucket.last_step, bucket.last);
  }
  if (!merged.empty() && (seq.is_null() || merged.back().last_step > seq.get<std::int64_t>())) {
    seq = merged.back().last_step;
  }
  return {{"rank", envelope.rank},
          {"points", points},
          {"downsampled", std::cmp_less(xs.size(), points)},
          {"x", std::move(xs)},
          {"y", std::move(ys)}};
}

}  // namespace

nlohmann::json series_document(const store::Store& store, const SeriesQuery& query) {
  std::int64_t after = query.after_step.value_or(std::numeric_limits<std::int64_t>::min());
  if (query.from_step && *query.from_step > std::numeric_limits<std::int64_t>::min()) {
    after = std::max(after, *query.from_step - 1);
  }
  const std::int64_t upto = query.to_step.value_or(std::numeric_limits<std::int64_t>::max());
  const std::size_t budget = std::clamp<std::size_t>(query.points, 3, k_max_series_points);
  nlohmann::json document = json_envelope("series");
  document["run"] = query.run_id;
  document["metric"] = query.metric;
  document["x"] = query.x == XAxis::wall ? "wall" : "step";
  nlohmann::json seq = query.after_step ? nlohmann::json(*query.after_step) : nlohmann::json(nullptr);
  document["ranks"] = nlohmann::json::array();
  const std::size_t buckets = std::max<std::size_t>(1, budget / 3);
  if (query.x == XAxis::step && upto > after && coarser_than_chunk(store, query, after, upto, buckets)) {
    // Far more points than the chart draws: from the chunks' headers, no point decoded.
    for (const auto& envelope : store.series_envelope(query.run_id, query.metric, buckets, after, upto)) {
      document["ranks"].push_back(envelope_rank(envelope, buckets, seq));
    }
    document["seq"] = seq;
    return document;
  }
  const auto columns = upto > after ? store.series_columns(query.run_id, query.metric, after, upto)
                                    : std::vector<store::SeriesColumns>{};
  std::vector<store::SeriesColumns> times;
  std::vector<store::SeriesAggregate> times_total;
  std::vector<store::SeriesAggregate> times_after;
  if (query.x == XAxis::wall) {
    times = store.series_columns(query.run_id, util::metric::step_time_ms, after, upto);
    if (after != std::numeric_limits<std::int64_t>::min()) {
      times_total = store.series_aggregates(query.run_id, util::metric::step_time_ms);
      times_after = store.series_aggregates(query.run_id, util::metric::step_time_ms, after);
    }
  }
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

nlohmann::json phase_shares_document(const store::Store& store, const PhaseSharesQuery& query) {
  // The phase timers every rank stores per step (docs/run.md, "Metrics recorded").
  static constexpr std::pair<const char*, const char*> k_phases[] = {{"data", util::metric::data_wait_ms},
                                                                     {"forward", util::metric::forward_ms},
                                                                     {"backward", util::metric::backward_ms},
                                                                     {"comm", util::metric::comm_wait_ms},
                                                                     {"optimizer", util::metric::optimizer_ms}};
  const auto rank_of = [&](const std::vector<store::SeriesColumns>& columns) -> const store::SeriesColumns* {
    const auto found =
        std::find_if(columns.begin(), columns.end(), [&](const auto& c) { return c.rank == query.rank; });
    return found == columns.end() ? nullptr : &*found;
  };
  const auto times_all = store.series_columns(query.run_id, util::metric::step_time_ms);
  nlohmann::json document = json_envelope("phase-shares");
  document["run"] = query.run_id;
  document["rank"] = query.rank;
  document["x"] = query.x == XAxis::wall ? "wall" : "step";
  document["ranks"] = nlohmann::json::array();
  for (const auto& rank : times_all) {
    document["ranks"].push_back(rank.rank);
  }
  const store::SeriesColumns* times = rank_of(times_all);
  const std::size_t n = times != nullptr ? times->steps.size() : 0;
  const std::size_t buckets = std::clamp<std::size_t>(query.buckets, 1, k_max_series_points / 3);
  const std::size_t size = n == 0 ? 1 : (n + buckets - 1) / buckets;
  // Bucket b holds the step-time points [b * size, (b + 1) * size); a phase point falls in the
  // bucket of the step-time point of its step (phases are stored for the same steps).
  std::vector<double> step_ms;
  nlohmann::json at = nlohmann::json::array();
  const std::vector<double> wall =
      query.x == XAxis::wall && times != nullptr ? wall_seconds(times->steps, times, 0.0) : std::vector<double>{};
  for (std::size_t start = 0; start < n; start += size) {
    const std::size_t end = std::min(n, start + size);
    double sum = 0.0;
    for (std::size_t i = start; i < end; ++i) {
      sum += std::isfinite(times->values[i]) ? times->values[i] : 0.0;
    }
    step_ms.push_back(sum);
    at.push_back(query.x == XAxis::wall ? nlohmann::json(wall[end - 1]) : nlohmann::json(times->steps[end - 1]));
  }
  const auto bucket_of = [&](std::int64_t step) -> std::optional<std::size_t> {
    const auto it = std::lower_bound(times->steps.begin(), times->steps.end(), step);
    if (it == times->steps.end() || *it != step) {
      return std::nullopt;  // a phase point of a step without a step time: no share to take it from
    }
    return static_cast<std::size_t>(it - times->steps.begin()) / size;
  };
  nlohmann::json phases = nlohmann::json::object();
  std::vector<double> timed(step_ms.size(), 0.0);
  bool every_phase = n > 0;
  bool any_phase = false;
  for (const auto& [key, series] : k_phases) {
    const auto columns = n > 0 ? store.series_columns(query.run_id, series) : std::vector<store::SeriesColumns>{};
    const store::SeriesColumns* own = rank_of(columns);
    if (own == nullptr || own->steps.empty()) {
      phases[key] = nullptr;  // not timed, which is not 0 %
      every_phase = false;
      continue;
    }
    std::vector<double> sums(step_ms.size(), 0.0);
    for (std::size_t i = 0; i < own->steps.size(); ++i) {
      if (const auto bucket = bucket_of(own->steps[i]); bucket && std::isfinite(own->values[i])) {
        sums[*bucket] += own->values[i];
      }
    }
    nlohmann::json shares = nlohmann::json::array();
    for (std::size_t b = 0; b < sums.size(); ++b) {
      timed[b] += sums[b];
      shares.push_back(step_ms[b] > 0.0 ? short_number(sums[b] / step_ms[b]) : nlohmann::json(nullptr));
    }
    phases[key] = std::move(shares);
    any_phase = true;
  }
  if (every_phase) {
    nlohmann::json other = nlohmann::json::array();
    for (std::size_t b = 0; b < step_ms.size(); ++b) {
      other.push_back(step_ms[b] > 0.0 ? short_number(std::max(0.0, 1.0 - timed[b] / step_ms[b]))
                                       : nlohmann::json(nullptr));
    }
    phases["other"] = std::move(other);
  } else {
    phases["other"] = nullptr;
  }
  document["steps"] = n;
  document["measured"] = any_phase;  // false: nothing to chart (a program that times no phase)
  document["at"] = std::move(at);
  document["phases"] = std::move(phases);
  return document;
}

nlohmann::json metric_names_document(const store::Store& store, const std::string& run_id) {
  nlohmann::json document = json_envelope("metric-names");
  document["run"] = run_id;
  document["names"] = store.metric_names(run_id);
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
