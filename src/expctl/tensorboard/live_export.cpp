#include "expctl/tensorboard/live_export.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "expctl/util/metric_names.hpp"

namespace expctl::tensorboard {
namespace {

using detail::RankInputs;
using PendingStep = std::map<int, RankInputs>;

constexpr std::string_view k_step_time = util::metric::step_time_ms;
constexpr std::string_view k_comm_wait = util::metric::comm_wait_ms;
constexpr std::string_view k_samples_per_sec = util::metric::samples_per_sec;
constexpr std::string_view k_loss = util::metric::loss;

double epoch_seconds(store::Clock::time_point time) {
  return std::chrono::duration<double>(time.time_since_epoch()).count();
}

/// Index one past the points that share points[begin]'s rank and step.
std::size_t group_end(std::span<const store::MetricPoint> points, std::size_t begin) {
  std::size_t end = begin + 1;
  while (end < points.size() && points[end].rank == points[begin].rank && points[end].step == points[begin].step) {
    ++end;
  }
  return end;
}

std::optional<double> find_value(std::span<const store::MetricPoint> group, std::string_view name) {
  const auto found = std::find_if(group.begin(), group.end(), [name](const auto& point) { return point.name == name; });
  return found == group.end() ? std::nullopt : std::optional(found->value);
}

/// The group's points as scalars, tagged with their metric names (valid while `group` is).
std::vector<Scalar> scalars_of(std::span<const store::MetricPoint> group) {
  std::vector<Scalar> scalars;
  scalars.reserve(group.size());
  for (const store::MetricPoint& point : group) {
    scalars.push_back({point.name, static_cast<float>(point.value)});
  }
  return scalars;
}

/// Σ over the ranks of `field` (in rank order, so the sum does not depend on arrival order), or
/// nullopt when a rank lacks it.
std::optional<double> sum_of(const PendingStep& ranks, std::optional<double> RankInputs::*field) {
  double sum = 0.0;
  for (const auto& [rank, inputs] : ranks) {
    if (!(inputs.*field)) {
      return std::nullopt;
    }
    sum += *(inputs.*field);
  }
  return sum;
}

/// The largest step time; NaN only when every rank's is NaN.
double max_step_time(const PendingStep& ranks) {
  double slowest = std::nan("");
  for (const auto& [rank, inputs] : ranks) {
    slowest = std::fmax(slowest, inputs.step_time_ms);
  }
  return slowest;
}

double total_step_time(const PendingStep& ranks) {
  double total = 0.0;
  for (const auto& [rank, inputs] : ranks) {
    total += inputs.step_time_ms;
  }
  return total;
}

double latest_wall_time(const PendingStep& ranks) {
  double latest = 0.0;
  for (const auto& [rank, inputs] : ranks) {
    latest = std::max(latest, inputs.wall_time);
  }
  return latest;
}

/// The values of k_job_series that this step's ranks allow, in that order.
std::vector<std::pair<std::string_view, double>> job_values(const PendingStep& ranks) {
  std::vector<std::pair<std::string_view, double>> values;
  if (const auto samples = sum_of(ranks, &RankInputs::samples_per_sec)) {
    values.emplace_back(k_job_series[0].tag, *samples);
  }
  values.emplace_back(k_job_series[1].tag, max_step_time(ranks));
  const auto waits = sum_of(ranks, &RankInputs::comm_wait_ms);
  if (const double total = total_step_time(ranks); waits && total > 0.0) {
    values.emplace_back(k_job_series[2].tag, *waits / total);
  }
  if (const auto losses = sum_of(ranks, &RankInputs::loss)) {
    values.emplace_back(k_job_series[3].tag, *losses / static_cast<double>(ranks.size()));
  }
  return values;
}

}  // namespace

LiveExport::LiveExport(const std::filesystem::path& out_dir, const std::string& run_id,
                       store::Clock::time_point started_at, LiveOptions options)
    : m_run_dir(out_dir / run_id), m_started(epoch_seconds(started_at)), m_options(std::move(options)) {}

LiveExport::LiveExport(const std::filesystem::path& out_dir, const store::RunRecord& run, LiveOptions options)
    : LiveExport(out_dir, run.id, store::parse_utc(run.started_at).value_or(store::Clock::time_point{}),
                 std::move(options)) {}

LiveExport::~LiveExport() {
  try {
    finish();
  } catch (const std::exception&) {
    // A destructor must not throw: the caller that wants to know calls finish() itself.
  }
}

void LiveExport::on_points(std::span<const store::MetricPoint> points) {
  for (std::size_t begin = 0; begin < points.size();) {
    const std::size_t end = group_end(points, begin);
    write_group(points.subspan(begin, end - begin));
    begin = end;
  }
}

void LiveExport::write_group(std::span<const store::MetricPoint> group) {
  const int rank = group.front().rank;
  const std::int64_t step = group.front().step;
  RankState& state = rank_state(rank);
  const auto step_time = find_value(group, k_step_time);
  if (step_time && std::isfinite(*step_time) && *step_time > 0.0) {
    state.elapsed_ms += *step_time;
  }
  const double wall_time = m_started + state.elapsed_ms / 1000.0;
  if (!state.writer) {
    state.writer.emplace(open_writer(fmt::format("rank{}", rank), m_started, step));
  }
  state.writer->add_scalars(step, wall_time, scalars_of(group));
  if (step_time) {
    add_job_inputs(rank, step, wall_time, group);
  }
}

LiveExport::RankState& LiveExport::rank_state(int rank) {
  const auto [state, added] = m_ranks.try_emplace(rank);
  if (added) {
    const auto elapsed = m_options.elapsed_ms.find(rank);
    state->second.elapsed_ms = elapsed == m_options.elapsed_ms.end() ? 0.0 : elapsed->second;
  }
  return state->second;
}

void LiveExport::add_job_inputs(int rank, std::int64_t step, double wall_time,
                                std::span<const store::MetricPoint> group) {
  m_job_ranks.insert(rank);
  PendingStep& ranks = m_pending[step];
  ranks[rank] = RankInputs{wall_time, *find_value(group, k_step_time), find_value(group, k_comm_wait),
                           find_value(group, k_samples_per_sec), find_value(group, k_loss)};
  if (m_options.world_size > 0 && ranks.size() >= static_cast<std::size_t>(m_options.world_size)) {
    write_job_step(step, ranks);
    m_pending.erase(step);
  }
}

void LiveExport::write_job_step(std::int64_t step, const PendingStep& ranks) {
  if (!m_job) {
    m_job.emplace(open_writer("job", m_started, step));
  }
  const auto values = job_values(ranks);
  std::vector<Scalar> scalars;
  for (const auto& [tag, value] : values) {
    scalars.push_back({tag, static_cast<float>(value)});
  }
  m_job->add_scalars(step, latest_wall_time(ranks), scalars);
}

EventWriter LiveExport::open_writer(const std::string& folder, double wall_time, std::int64_t first_step) const {
  EventWriter writer(m_run_dir / folder, folder, wall_time);
  if (m_options.resumed_from) {
    // The ranks may start earlier than this node's checkpoint (another node's newest intact one
    // is older, or it has none and every rank starts again from step 0): START at the first step
    // written then, so that TensorBoard drops every step the earlier files hold from there on.
    writer.add_session_start(std::min(*m_options.resumed_from + 1, first_step), wall_time);
  }
  return writer;
}

void LiveExport::flush(bool sync) {
  for (auto& [rank, state] : m_ranks) {
    if (state.writer) {
      state.writer->flush(sync);
    }
  }
  if (m_job) {
    m_job->flush(sync);
  }
}

void LiveExport::finish() {
  if (m_finished) {
    return;
  }
  m_finished = true;
  for (const auto& [step, ranks] : m_pending) {
    if (ranks.size() == m_job_ranks.size()) {
      write_job_step(step, ranks);
    }
  }
  m_pending.clear();
  for (auto& [rank, state] : m_ranks) {
    if (state.writer) {
      state.writer->close();
    }
  }
  if (m_job) {
    m_job->close();
  }
}

std::vector<WrittenFile> LiveExport::files() const {
  std::vector<WrittenFile> files;
  for (const auto& [rank, state] : m_ranks) {
    if (state.writer) {
      files.push_back({state.writer->path(), state.writer->scalars()});
    }
  }
  if (m_job) {
    files.push_back({m_job->path(), m_job->scalars()});
  }
  return files;
}

}  // namespace expctl::tensorboard
