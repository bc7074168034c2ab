#include "expctl/run/recorder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/statistics.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t k_batch_points = 4096;
constexpr auto k_batch_interval = std::chrono::milliseconds(500);
constexpr auto k_busy_pause = std::chrono::milliseconds(500);

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

/// A step field in its metric's unit, as stored: timers by stored_milliseconds, the throughput by
/// stored_ratio.
double metric_value(const train::StepField& field, const train::StepMetrics& step) {
  if (std::string_view(field.metric) == util::metric::samples_per_sec) {
    return stored_ratio(field.get(step) * field.scale);
  }
  return field.scale == 1000.0 ? stored_milliseconds(field.get(step)) : field.get(step) * field.scale;
}

}  // namespace

double stored_milliseconds(double seconds) {
  const double nanoseconds = std::round(seconds * 1e9);
  return std::isfinite(nanoseconds) && std::fabs(nanoseconds) < 0x1p53 ? nanoseconds / 1e6 : seconds * 1000.0;
}

double stored_ratio(double value) {
  if (!std::isfinite(value) || value == 0.0) {
    return value;
  }
  const int exponent = std::max(0, 5 - static_cast<int>(std::floor(std::log10(std::fabs(value)))));
  if (exponent > 15 || std::fabs(value) >= 1e15) {
    return value;
  }
  const double power = std::pow(10.0, exponent);
  return std::round(value * power) / power;
}

std::map<int, double> straggler_scores(const std::map<int, train::StepMetrics>& ranks, int expected) {
  std::vector<double> compute;
  for (const auto& [rank, step] : ranks) {
    compute.push_back(train::compute_seconds(step));
  }
  std::map<int, double> scores;
  if (ranks.size() < 2 || ranks.size() < static_cast<std::size_t>(expected)) {
    return scores;
  }
  const double middle = compare::median(compute);
  for (const auto& [rank, step] : ranks) {
    if (middle > 0.0 && std::isfinite(middle)) {
      scores[rank] = train::compute_seconds(step) / middle;
    }
  }
  return scores;
}

bool is_store_busy(const std::exception& error) {
  return store::failure_kind(error) == store::FailureKind::busy;
}

Recorder::Recorder(store::Store& store, std::string run_id, std::filesystem::path run_dir, RunObserver& observer,
                   SteadyClock::time_point start, int live_ranks)
    : m_store(store),
      m_run_id(std::move(run_id)),
      m_run_dir(std::move(run_dir)),
      m_observer(observer),
      m_start(start),
      m_live_ranks(live_ranks),
      m_thread([this] { writer_loop(); }) {}

Recorder::~Recorder() {
  if (m_tensorboard) {
    post([this](store::Store&) { finish_tensorboard(); });
  }
  drain();
  {
    std::lock_guard lock(m_mutex);
    m_done = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

void Recorder::throw_if_fatal() const {
  if (const auto fatal = fatal_error()) {
    throw util::StoreError(*fatal, util::ExitCode::run_failed);
  }
}

void Recorder::after_record() {
  enqueue_points();
  note_if_locked();
}

void Recorder::on_start(const train::TrainingStart& start) {
  m_observer.training(start.total_steps, start.world_size);
  after_record();
}

void Recorder::on_collectives(const std::string& allreduce) {
  {
    std::lock_guard lock(m_mutex);
    m_facts.allreduce = allreduce;
  }
  after_record();
}

void Recorder::on_skipped_images(const std::vector<std::string>& files) {
  {
    std::lock_guard lock(m_mutex);
    m_facts.skipped_images.insert(files.begin(), files.end());
  }
  after_record();
}

void Recorder::on_logged_step(int rank, std::int64_t step, std::vector<store::MetricPoint> points) {
  train::StepMetrics shown;  // for the observer's progress line
  shown.step = step;
  shown.loss = std::numeric_limits<double>::quiet_NaN();
  bool has_loss = false;
  {
    std::lock_guard lock(m_mutex);
    for (const auto& point : points) {
      if (point.name == util::metric::loss) {
        shown.loss = point.value;
        has_loss = true;
      } else if (point.name == compare::k_step_time_series) {
        shown.step_time_s = point.value / 1000.0;
      } else if (point.name == compare::k_throughput_series) {
        shown.samples_per_sec = point.value;
      }
    }
    m_points.insert(m_points.end(), std::make_move_iterator(points.begin()), std::make_move_iterator(points.end()));
    m_steps[rank] = std::max(m_steps[rank], step);
    if (has_loss && !std::isfinite(shown.loss) && (!m_divergence || m_divergence->step == step)) {
      if (!m_divergence) {
        m_divergence = Divergence{step, {}};
      }
      m_divergence->losses[rank] = shown.loss;
    }
    if (rank == 0 && !m_facts.time_to_first_step) {
      m_facts.time_to_first_step = seconds_since(m_start) - shown.step_time_s;
    }
  }
  if (rank == 0 && has_loss) {
    m_observer.step(shown);
  }
  enqueue_points();
  note_if_locked();
}

// A write that has not returned for a while is waiting for another process's lock (the store
// retries inside the call): say so, then every k_locked_note_every.
void Recorder::note_if_locked() {
  std::unique_lock lock(m_mutex);
  const auto now = SteadyClock::now();
  if (!m_writing || now - m_write_started < k_locked_note_after ||
      (m_locked_noted && now - *m_locked_noted < k_locked_note_every)) {
    return;
  }
  m_locked_noted = now;
  const double waited = std::chrono::duration<double>(now - m_write_started).count();
  lock.unlock();
  m_observer.note(fmt::format("the results store {} is locked by another process ({:.0f} s so far); training goes "
                              "on and its records are kept until the lock is released",
                              m_store.location(), waited),
                  true);
}

void Recorder::on_step(int rank, const train::StepMetrics& step) {
  hold(rank, step);
  if (rank == 0) {
    std::lock_guard lock(m_mutex);
    if (!m_facts.time_to_first_step) {
      m_facts.time_to_first_step = seconds_since(m_start) - step.step_time_s;
    }
  }
  if (rank == 0) {
    m_observer.step(step);
  }
  after_record();
}

// A step's points wait until every rank this recorder hears live has reported it (the ranks are
// in lock-step, so not for long): then each rank's straggler score can be stored with its other
// points, as one group per rank and step. Steps left incomplete are emitted as they are once a
// later step completes, or by drain().
void Recorder::hold(int rank, const train::StepMetrics& step) {
  std::lock_guard lock(m_mutex);
  if (m_live_ranks < 2 || step.step <= m_emitted_step) {
    push_points_locked(rank, step, std::nullopt);
    return;
  }
  auto& held = m_held[step.step];
  held.ranks[rank] = step;
  if (held.ranks.size() >= static_cast<std::size_t>(m_live_ranks)) {
    emit_held_through(step.step);
  }
}

void Recorder::on_eval(const train::EvalMetrics& eval) {
  {
    std::lock_guard lock(m_mutex);
    std::vector<store::MetricPoint> points = {{0, eval.step, util::metric::eval_loss, eval.loss}};
    if (eval.accuracy) {
      points.push_back({0, eval.step, util::metric::eval_accuracy, *eval.accuracy});
    }
    const auto held = m_held.find(eval.step);
    auto& target = held == m_held.end() ? m_points : held->second.rank0_extra;
    target.insert(target.end(), points.begin(), points.end());
    if (!eval.precision.empty()) {
      m_facts.eval_precision = eval.precision;
      m_facts.eval_fallback = eval.fallback.empty() ? std::nullopt : std::optional(eval.fallback);
    }
  }
  after_record();
}

void Recorder::emit_held_through(std::int64_t step) {
  while (!m_held.empty() && m_held.begin()->first <= step) {
    auto node = m_held.extract(m_held.begin());
    const auto scores = straggler_scores(node.mapped().ranks, m_live_ranks);
    for (const auto& [rank, metrics] : node.mapped().ranks) {
      const auto score = scores.find(rank);
      push_points_locked(rank, metrics, score == scores.end() ? std::nullopt : std::optional(score->second));
      if (rank == 0) {
        m_points.insert(m_points.end(), node.mapped().rank0_extra.begin(), node.mapped().rank0_extra.end());
      }
    }
    m_emitted_step = std::max(m_emitted_step, node.key());
  }
}

void Recorder::push_points(int rank, const train::StepMetrics& step) {
  std::lock_guard lock(m_mutex);
  push_points_locked(rank, step, std::nullopt);
}

void Recorder::push_points_locked(int rank, const train::StepMetrics& step, std::optional<double> straggler) {
  for (const auto& field : train::step_fields()) {
    if (field.metric != nullptr) {
      m_points.push_back({rank, step.step, field.metric, metric_value(field, step)});
    }
  }
  if (straggler) {
    m_points.push_back({rank, step.step, std::string(k_straggler_metric), stored_ratio(*straggler)});
  }
  m_steps[rank] = std::max(m_steps[rank], step.step);
  if (!std::isfinite(step.loss) && (!m_divergence || m_divergence->step == step.step)) {
    if (!m_divergence) {
      m_divergence = Divergence{step.step, {}};
    }
    m_divergence->losses[rank] = step.loss;
  }
}

void Recorder::on_checkpoint(const train::CheckpointFile& file) {
  const auto relative = file.path.lexically_relative(m_run_dir);
  store::ArtifactRecord artifact{relative.empty() ? file.path.string() : relative.string(), file.sha256,
                                 file.size_bytes};
  post([artifact, id = m_run_id](store::Store& store) { store.add_artifact(id, artifact); });
  after_record();
}

void Recorder::on_remote_steps(int rank, const std::vector<train::StepMetrics>& steps) {
  for (const auto& step : steps) {
    push_points(rank, step);
  }
  after_record();
}

// Moves the pending points into the queue as one write, when there are enough or enough time
// has passed (a fast run costs a few transactions a second, not one per step).
void Recorder::enqueue_points() {
  std::lock_guard lock(m_mutex);
  if (m_points.empty() ||
      (m_points.size() < k_batch_points && SteadyClock::now() - m_last_enqueue < k_batch_interval)) {
    return;
  }
  m_last_enqueue = SteadyClock::now();
  m_queue.push_back([this, points = std::move(m_points)](store::Store& store) { write_points(store, points); });
  m_points.clear();
  m_wake.notify_all();
}

void Recorder::export_tensorboard(std::unique_ptr<tensorboard::LiveExport> live) {
  post([this, live = std::shared_ptr<tensorboard::LiveExport>(std::move(live))](store::Store&) {
    m_tensorboard = live;
  });
}

void Recorder::write_points(store::Store& store, const std::vector<store::MetricPoint>& points) {
  store.append_metrics(m_run_id, points);
  if (!m_tensorboard) {
    return;
  }
  try {
    m_tensorboard->on_points(points);
    m_tensorboard->flush();
  } catch (const util::Failure& error) {
    m_observer.note(fmt::format("TensorBoard export stopped: {}; the store keeps every point (expctl export "
                                "tensorboard {} writes them later)",
                                error.what(), m_run_id),
                    true);
    m_tensorboard.reset();
  }
}

void Recorder::finish_tensorboard() {
  try {
    m_tensorboard->finish();
  } catch (const util::Failure& error) {
    m_observer.note(fmt::format("TensorBoard export incomplete: {}", error.what()), true);
  }
  m_tensorboard.reset();
}

void Recorder::post(Write write) {
  {
    std::lock_guard lock(m_mutex);
    m_last_enqueue = SteadyClock::time_point{};  // the points before this write go first
  }
  enqueue_points();
  std::lock_guard lock(m_mutex);
  m_queue.push_back(std::move(write));
  m_wake.notify_all();
}

void Recorder::drain() {
  {
    std::lock_guard lock(m_mutex);
    if (!m_held.empty()) {
      emit_held_through(m_held.rbegin()->first);
    }
  }
  post([](store::Store&) {});  // flushes the pending points
  std::unique_lock lock(m_mutex);
  while (!m_idle.wait_for(lock, std::chrono::seconds(1),
                          [this] { return (m_queue.empty() && !m_writing) || m_fatal.has_value(); })) {
    lock.unlock();
    note_if_locked();
    lock.lock();
  }
}

bool Recorder::keeping_up() const {
  std::lock_guard lock(m_mutex);
  return !m_fatal && m_queue.size() <= 2 && m_held.size() < 16 &&
         (!m_writing || SteadyClock::now() - m_write_started < k_locked_note_after);
}

std::optional<std::string> Recorder::fatal_error() const {
  std::lock_guard lock(m_mutex);
  return m_fatal;
}

RunFacts Recorder::facts() const {
  std::lock_guard lock(m_mutex);
  return m_facts;
}

std::optional<Divergence> Recorder::divergence() const {
  std::lock_guard lock(m_mutex);
  return m_divergence;
}

void Recorder::on_usage(int rank, const launch::UsageRate::Sample& sample) {
  {
    std::lock_guard lock(m_mutex);
    const auto step = m_steps.find(rank);
    auto& last = m_usage_steps[rank];
    if (step == m_steps.end() || step->second <= last) {
      return;
    }
    last = step->second;
    m_points.push_back({rank, step->second, util::metric::sys_cpu_percent, stored_ratio(sample.cpu_percent)});
    m_points.push_back({rank, step->second, util::metric::sys_rss_mb, sample.rss_mb});
    if (sample.gpu_percent && sample.gpu_mem_mb) {
      m_points.push_back({rank, step->second, util::metric::sys_gpu_percent, *sample.gpu_percent});
      m_points.push_back({rank, step->second, util::metric::sys_gpu_mem_mb, *sample.gpu_mem_mb});
    }
  }
  after_record();
}

bool Recorder::usage_wanted() {
  const char* sys = std::getenv("EXPCTL_SYS_METRICS");
  return sys == nullptr || std::string_view(sys) != "0";
}

std::map<int, std::int64_t> Recorder::last_steps() const {
  std::lock_guard lock(m_mutex);
  return m_steps;
}

void Recorder::writer_loop() {
  auto last_heartbeat = SteadyClock::now();
  std::unique_lock lock(m_mutex);
  while (true) {
    // After a fatal error nothing more is written: the queue is kept, only `done` ends the loop.
    m_wake.wait_for(lock, k_batch_interval, [this] { return (!m_queue.empty() && !m_fatal) || m_done; });
    if (m_done && (m_queue.empty() || m_fatal)) {
      return;
    }
    if (SteadyClock::now() - last_heartbeat >= k_store_heartbeat_every && !m_fatal) {
      last_heartbeat = SteadyClock::now();
      m_queue.push_front([id = m_run_id](store::Store& store) { store.heartbeat(id); });
    }
    if (m_queue.empty() || m_fatal) {
      m_idle.notify_all();
      continue;
    }
    Write write = std::move(m_queue.front());
    m_queue.pop_front();
    m_writing = true;
    m_write_started = SteadyClock::now();
    lock.unlock();
    const bool ok = write_one(write);
    lock.lock();
    m_writing = false;
    if (m_locked_noted) {
      m_locked_noted.reset();
      lock.unlock();
      m_observer.note("the results store is writable again; the buffered records are stored", true);
      lock.lock();
    }
    if (!ok) {
      m_queue.push_front(std::move(write));  // kept: the store may come back (never with m_fatal)
    }
    m_idle.notify_all();
  }
}

// One write, retried for as long as the store stays locked by another process (the store's own
// retries end after a while). False when it failed for good (m_fatal is then set).
bool Recorder::write_one(Write& write) {
  while (true) {
    try {
      write(m_store);
      return true;
    } catch (const util::Failure& error) {
      if (!is_store_busy(error)) {
        std::lock_guard lock(m_mutex);
        m_fatal = error.what();
        return false;
      }
      note_if_locked();
      std::this_thread::sleep_for(k_busy_pause);
    }
  }
}

}  // namespace expctl::run
