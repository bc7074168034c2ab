#include "expctl/api/watch.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/api/runs.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::api {
namespace {

namespace metric = util::metric;
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
  return PhaseShares{share(metric::data_wait_ms), share(metric::forward_ms), share(metric::backward_ms),
                     share(metric::comm_wait_ms), share(metric::optimizer_ms)};
}

RankView rank_view(const store::Store& store, const std::string& run, int rank) {
  RankView view;
  view.rank = rank;
  const auto times = recent(store, run, metric::step_time_ms, rank, k_watch_window);
  if (!times.empty()) {
    view.step = times.back().step;
  }
  view.loss = latest(recent(store, run, metric::loss, rank, 1));
  view.samples_per_sec = latest(recent(store, run, metric::samples_per_sec, rank, 1));
  view.step_time_ms = mean(times);
  view.comm_wait_ms = mean(recent(store, run, metric::comm_wait_ms, rank, k_watch_window));
  view.phases = phase_shares(store, run, rank, times);
  view.straggler_score = latest(recent(store, run, metric::straggler_score, rank, 1));
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
    for (int rank = 0; series.name == metric::step_time_ms && rank < series.ranks; ++rank) {
      ranks.push_back(store::RankRecord{.rank = rank, .status = run.status});
    }
  }
  return ranks;
}

std::optional<std::int64_t> total_steps(const store::Store& store, const store::RunRecord& run,
                                        const FolderAccess& folder) {
  // Another host's run folder, or epochs instead of max_steps: not known.
  const nlohmann::json spec = resolved_spec(store, run, folder);
  const nlohmann::json* steps = spec.is_object() ? json_at(spec, "train.max_steps") : nullptr;
  if (steps == nullptr || !steps->is_number_integer()) {
    return std::nullopt;
  }
  const auto value = steps->get<std::int64_t>();
  return value > 0 ? std::optional(value) : std::nullopt;
}

}  // namespace

std::int64_t WatchView::latest_step() const {
  std::int64_t step = 0;
  for (const auto& rank : ranks) {
    step = std::max(step, rank.step.value_or(0));
  }
  return step;
}

std::string watched_run(const store::Store& store, const std::string& selector) {
  if (!selector.empty()) {
    return compare::resolve_one(store, selector, "watch").id;
  }
  auto runs = store.list_runs({.status = store::RunStatus::running, .limit = 1});
  if (runs.empty()) {
    runs = store.list_runs({.limit = 1});
  }
  if (runs.empty()) {
    throw util::UsageError(fmt::format("{} holds no run yet: start one with expctl run SPEC", store.location()));
  }
  return runs.front().id;
}

WatchView watch_view(const store::Store& store, const std::string& run_id, const FolderAccess& folder) {
  WatchView view;
  view.run = store.find_run(run_id);
  view.total_steps = total_steps(store, view.run, folder);
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

namespace {

nlohmann::json rank_json(const RankView& rank) {
  using nlohmann::json;
  auto value = [](const auto& optional) { return optional ? json(*optional) : json(nullptr); };
  json phases = nullptr;
  if (rank.phases) {
    phases = {{"data", value(rank.phases->data)},         {"forward", value(rank.phases->forward)},
              {"backward", value(rank.phases->backward)}, {"comm", value(rank.phases->comm)},
              {"optimizer", value(rank.phases->optimizer)}};
  }
  return {{"rank", rank.rank},
          {"status", store::to_string(rank.status)},
          {"step", value(rank.step)},
          {"loss", value(rank.loss)},
          {"samples_per_sec", value(rank.samples_per_sec)},
          {"step_time_ms", value(rank.step_time_ms)},
          {"comm_wait_ms", value(rank.comm_wait_ms)},
          {"phase_shares", phases},
          {"straggler_score", value(rank.straggler_score)},
          {"straggler", rank.straggler},
          {"quiet_for_s", value(rank.quiet_for_s)}};
}

}  // namespace

nlohmann::json view_json(const WatchView& view) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& rank : view.ranks) {
    ranks.push_back(rank_json(rank));
  }
  return {{"run", run_json(view.run)},
          {"total_steps", view.total_steps ? nlohmann::json(*view.total_steps) : nlohmann::json(nullptr)},
          {"ended", view.ended()},
          {"ranks", ranks}};
}

namespace {

// "n/a": the phase is not timed in this run (a program's, unless it logs it).
std::string percent(const std::optional<double>& share) {
  return share ? fmt::format("{:.0f}%", 100.0 * *share) : "n/a";
}

template <typename T>
std::string or_dash(const std::optional<T>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "-";
}

std::vector<std::string> phase_cells(const std::optional<PhaseShares>& phases) {
  if (!phases) {
    return {"-", "-", "-", "-", "-"};
  }
  return {percent(phases->data), percent(phases->forward), percent(phases->backward), percent(phases->comm),
          percent(phases->optimizer)};
}

std::string straggler_cell(const RankView& rank) {
  return rank.straggler_score ? fmt::format("{:.2f}{}", *rank.straggler_score, rank.straggler ? " *" : "") : "-";
}

std::string rank_table(const WatchView& view) {
  util::TextTable table({"rank", "status", "step", "loss", "samples/s", "step ms", "data", "fwd", "bwd", "comm", "opt",
                         "straggler", "quiet"});
  for (std::size_t column = 2; column < 13; ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (const auto& rank : view.ranks) {
    std::vector<std::string> cells = {
        std::to_string(rank.rank),    std::string(store::to_string(rank.status)), or_dash(rank.step, "{}"),
        or_dash(rank.loss, "{:.4f}"), or_dash(rank.samples_per_sec, "{:.0f}"),    or_dash(rank.step_time_ms, "{:.2f}")};
    for (auto& cell : phase_cells(rank.phases)) {
      cells.push_back(std::move(cell));
    }
    cells.push_back(straggler_cell(rank));
    cells.push_back(or_dash(rank.quiet_for_s, "{:.0f}s"));
    table.add_row(std::move(cells));
  }
  return table.render();
}

std::string headline(const WatchView& view) {
  const std::string of = view.total_steps ? fmt::format("/{}", *view.total_steps) : "";
  return fmt::format("run {}  {}  step {}{}{}", view.run.id, store::to_string(view.run.status), view.latest_step(), of,
                     view.waiting());
}

}  // namespace

std::string view_text(const WatchView& view) {
  return headline(view) + "\n" + rank_table(view);
}

}  // namespace expctl::api
