#include "expctl/run/watch.hpp"

#include <algorithm>
#include <cmath>

#include "expctl/run/recorder.hpp"
#include "expctl/run/resolved_run.hpp"

namespace expctl::run {
namespace {

using Points = std::vector<store::MetricPoint>;

Points recent(const store::Store& store, const std::string& run, const char* name, int rank, int count) {
  return store.recent_metrics(run, name, rank, count);
}

double total(const Points& points) {
  double sum = 0.0;
  for (const auto& point : points) {
    sum += std::isfinite(point.value) ? point.value : 0.0;
  }
  return sum;
}

std::optional<double> latest(const Points& points) {
  return points.empty() ? std::nullopt : std::optional(points.back().value);
}

std::optional<double> mean(const Points& points) {
  return points.empty() ? std::nullopt : std::optional(total(points) / static_cast<double>(points.size()));
}

std::optional<PhaseShares> phase_shares(const store::Store& store, const std::string& run, int rank,
                                        const Points& step_times) {
  const double time = total(step_times);
  if (time <= 0.0) {
    return std::nullopt;
  }
  auto share = [&](const char* name) -> std::optional<double> {
    const auto points = recent(store, run, name, rank, k_watch_window);
    return points.empty() ? std::nullopt : std::optional(total(points) / time);  // not timed: not 0 %
  };
  return PhaseShares{share("data_wait_ms"), share("forward_ms"), share("backward_ms"), share("comm_wait_ms"),
                     share("optimizer_ms")};
}

RankView rank_view(const store::Store& store, const std::string& run, int rank) {
  RankView view;
  view.rank = rank;
  const auto times = recent(store, run, "step_time_ms", rank, k_watch_window);
  if (!times.empty()) {
    view.step = times.back().step;
  }
  view.loss = latest(recent(store, run, "loss", rank, 1));
  view.samples_per_sec = latest(recent(store, run, "samples_per_sec", rank, 1));
  view.step_time_ms = mean(times);
  view.comm_wait_ms = mean(recent(store, run, "comm_wait_ms", rank, k_watch_window));
  view.phases = phase_shares(store, run, rank, times);
  view.straggler_score = latest(recent(store, run, std::string(k_straggler_metric).c_str(), rank, 1));
  view.straggler = view.straggler_score && *view.straggler_score >= k_straggler_mark;
  return view;
}

// The ranks to show: those recorded for the run; for a run with none recorded (an imported
// one), those that stored a step time (metric_series reads every point: only then).
std::vector<store::RankRecord> ranks_of(const store::Store& store, const store::RunRecord& run) {
  auto ranks = store.ranks(run.id);
  if (!ranks.empty()) {
    return ranks;
  }
  for (const auto& series : store.metric_series(run.id)) {
    for (int rank = 0; series.name == "step_time_ms" && rank < series.ranks; ++rank) {
      ranks.push_back(store::RankRecord{.rank = rank, .status = run.status});
    }
  }
  return ranks;
}

std::optional<std::int64_t> total_steps(const store::RunRecord& run) {
  try {
    const auto spec = read_resolved_run(run.run_dir).spec;
    const auto steps = spec.at("train").at("max_steps").get<std::int64_t>();
    return steps > 0 ? std::optional(steps) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // another host's run folder, or epochs instead of max_steps
  }
}

}  // namespace

WatchView watch_view(const store::Store& store, const std::string& run_id) {
  WatchView view;
  view.run = store.find_run(run_id);
  view.total_steps = total_steps(view.run);
  for (const auto& rank : ranks_of(store, view.run)) {
    RankView shown = rank_view(store, view.run.id, rank.rank);
    shown.status = rank.status;
    view.ranks.push_back(std::move(shown));
  }
  return view;
}

void QuietClock::update(WatchView& view, std::chrono::steady_clock::time_point now) {
  for (auto& rank : view.ranks) {
    const std::int64_t step = rank.step.value_or(0);
    auto [seen, added] = m_seen.try_emplace(rank.rank, step, now);
    if (!added && seen->second.first != step) {
      seen->second = {step, now};
    }
    rank.quiet_for_s = std::chrono::duration<double>(now - seen->second.second).count();
  }
}

}  // namespace expctl::run
