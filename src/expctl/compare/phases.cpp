#include "expctl/compare/phases.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "expctl/util/metric_names.hpp"

namespace expctl::compare {
namespace {

std::map<int, store::SeriesAggregate> aggregates(const store::Store& store, const std::string& run, const char* name) {
  std::map<int, store::SeriesAggregate> by_rank;
  for (const auto& aggregate : store.series_aggregates(run, name)) {
    by_rank[aggregate.rank] = aggregate;
  }
  return by_rank;
}

// None when the rank stored no such series: not timed is not 0 %.
std::optional<double> share_of(const std::map<int, store::SeriesAggregate>& series, int rank, double total) {
  const auto found = series.find(rank);
  if (found == series.end() || found->second.count == 0) {
    return std::nullopt;
  }
  return total <= 0.0 ? 0.0 : found->second.sum / total;
}

void set_straggler(RankPhases& row, const std::map<int, store::SeriesAggregate>& straggler) {
  if (const auto found = straggler.find(row.rank); found != straggler.end() && found->second.count > 0) {
    row.straggler_mean = found->second.sum / static_cast<double>(found->second.count);
    row.straggler_max = found->second.max;
  }
}

}  // namespace

std::vector<RankPhases> phase_breakdown(const store::Store& store, const std::string& run_id) {
  const auto data = aggregates(store, run_id, util::metric::data_wait_ms);
  const auto forward = aggregates(store, run_id, util::metric::forward_ms);
  const auto backward = aggregates(store, run_id, util::metric::backward_ms);
  const auto comm = aggregates(store, run_id, util::metric::comm_wait_ms);
  const auto optimizer = aggregates(store, run_id, util::metric::optimizer_ms);
  const auto straggler = aggregates(store, run_id, k_straggler_series);
  std::vector<RankPhases> rows;
  for (const auto& [rank, time] : aggregates(store, run_id, util::metric::step_time_ms)) {
    RankPhases row;
    row.rank = rank;
    row.steps = time.count;
    row.step_time_ms = time.count > 0 ? time.sum / static_cast<double>(time.count) : 0.0;
    row.shares = {share_of(data, rank, time.sum), share_of(forward, rank, time.sum), share_of(backward, rank, time.sum),
                  share_of(comm, rank, time.sum), share_of(optimizer, rank, time.sum)};
    if (const auto& s = row.shares; s.data && s.forward && s.backward && s.comm && s.optimizer) {
      row.other = std::max(0.0, 1.0 - *s.data - *s.forward - *s.backward - *s.comm - *s.optimizer);
    }
    set_straggler(row, straggler);
    rows.push_back(row);
  }
  return rows;
}

nlohmann::json phases_json(const std::vector<RankPhases>& phases) {
  const auto or_null = [](const std::optional<double>& value) { return value ? nlohmann::json(*value) : nlohmann::json(); };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : phases) {
    rows.push_back({{"rank", row.rank},
                    {"steps", row.steps},
                    {"step_time_ms", row.step_time_ms},
                    {"shares",
                     {{"data", or_null(row.shares.data)},
                      {"forward", or_null(row.shares.forward)},
                      {"backward", or_null(row.shares.backward)},
                      {"comm", or_null(row.shares.comm)},
                      {"optimizer", or_null(row.shares.optimizer)},
                      {"other", or_null(row.other)}}},
                    {"straggler_mean", or_null(row.straggler_mean)},
                    {"straggler_max", or_null(row.straggler_max)}});
  }
  return rows;
}

namespace {

std::optional<double> optional_number(const nlohmann::json& row, const char* key) {
  const auto found = row.find(key);
  return found != row.end() && found->is_number() ? std::optional(found->get<double>()) : std::nullopt;
}

RankPhases phase_row(const nlohmann::json& row) {
  const nlohmann::json& shares = row.at("shares");
  RankPhases phases;
  phases.rank = row.at("rank").get<int>();
  phases.steps = row.at("steps").get<std::int64_t>();
  phases.step_time_ms = row.at("step_time_ms").get<double>();
  phases.shares = {optional_number(shares, "data"), optional_number(shares, "forward"),
                   optional_number(shares, "backward"), optional_number(shares, "comm"),
                   optional_number(shares, "optimizer")};
  phases.other = optional_number(shares, "other");
  phases.straggler_mean = optional_number(row, "straggler_mean");
  phases.straggler_max = optional_number(row, "straggler_max");
  return phases;
}

}  // namespace

std::optional<std::vector<RankPhases>> phases_from_json(const nlohmann::json& summary) {
  const auto found = summary.find(util::summary_key::phases);
  if (found == summary.end() || !found->is_array()) {
    return std::nullopt;
  }
  std::vector<RankPhases> rows;
  try {
    for (const auto& row : *found) {
      rows.push_back(phase_row(row));
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a malformed summary: the stored series still answer
  }
  return rows;
}

std::vector<RankPhases> run_phases(const store::Store& store, const std::string& run_id, const nlohmann::json& summary) {
  if (summary.is_object()) {
    if (auto rows = phases_from_json(summary)) {
      return std::move(*rows);
    }
  }
  return phase_breakdown(store, run_id);
}

StragglerTimeline straggler_timeline(const store::Store& store, const std::string& run_id) {
  std::vector<std::pair<std::int64_t, double>> points;  // (step, score) of every rank
  for (const auto& rank : store.series_columns(run_id, k_straggler_series)) {
    for (std::size_t i = 0; i < rank.steps.size(); ++i) {
      if (std::isfinite(rank.values[i])) {
        points.emplace_back(rank.steps[i], rank.values[i]);
      }
    }
  }
  std::sort(points.begin(), points.end());  // a sorted vector, not a map: 100k steps in a few ms
  StragglerTimeline timeline;
  for (const auto& [step, score] : points) {
    if (!timeline.steps.empty() && timeline.steps.back() == step) {
      timeline.scores.back() = std::max(timeline.scores.back(), score);
    } else {
      timeline.steps.push_back(step);
      timeline.scores.push_back(score);
    }
  }
  return timeline;
}

}  // namespace expctl::compare
