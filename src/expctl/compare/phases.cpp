#include "expctl/compare/phases.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace expctl::compare {
namespace {

std::map<int, store::SeriesAggregate> aggregates(const store::Store& store, const std::string& run, const char* name) {
  std::map<int, store::SeriesAggregate> by_rank;
  for (const auto& aggregate : store.series_aggregates(run, name)) {
    by_rank[aggregate.rank] = aggregate;
  }
  return by_rank;
}

double share_of(const std::map<int, store::SeriesAggregate>& series, int rank, double total) {
  const auto found = series.find(rank);
  return found == series.end() || total <= 0.0 ? 0.0 : found->second.sum / total;
}

void set_straggler(RankPhases& row, const std::map<int, store::SeriesAggregate>& straggler) {
  if (const auto found = straggler.find(row.rank); found != straggler.end() && found->second.count > 0) {
    row.straggler_mean = found->second.sum / static_cast<double>(found->second.count);
    row.straggler_max = found->second.max;
  }
}

}  // namespace

std::vector<RankPhases> phase_breakdown(const store::Store& store, const std::string& run_id) {
  const auto data = aggregates(store, run_id, "data_wait_ms");
  const auto forward = aggregates(store, run_id, "forward_ms");
  const auto backward = aggregates(store, run_id, "backward_ms");
  const auto comm = aggregates(store, run_id, "comm_wait_ms");
  const auto optimizer = aggregates(store, run_id, "optimizer_ms");
  const auto straggler = aggregates(store, run_id, k_straggler_series);
  std::vector<RankPhases> rows;
  for (const auto& [rank, time] : aggregates(store, run_id, "step_time_ms")) {
    RankPhases row{rank, time.count, time.count > 0 ? time.sum / static_cast<double>(time.count) : 0.0};
    row.shares = {share_of(data, rank, time.sum), share_of(forward, rank, time.sum), share_of(backward, rank, time.sum),
                  share_of(comm, rank, time.sum), share_of(optimizer, rank, time.sum)};
    const auto& s = row.shares;
    row.other = std::max(0.0, 1.0 - s.data - s.forward - s.backward - s.comm - s.optimizer);
    set_straggler(row, straggler);
    rows.push_back(row);
  }
  return rows;
}

StragglerTimeline straggler_timeline(const store::Store& store, const std::string& run_id) {
  std::map<std::int64_t, double> worst;
  for (const auto& rank : store.series_columns(run_id, k_straggler_series)) {
    for (std::size_t i = 0; i < rank.steps.size(); ++i) {
      if (std::isfinite(rank.values[i])) {
        auto [entry, added] = worst.try_emplace(rank.steps[i], rank.values[i]);
        entry->second = std::max(entry->second, rank.values[i]);
      }
    }
  }
  StragglerTimeline timeline;
  for (const auto& [step, score] : worst) {
    timeline.steps.push_back(step);
    timeline.scores.push_back(score);
  }
  return timeline;
}

}  // namespace expctl::compare
