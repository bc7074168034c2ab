#include "expctl/sweep_run/runner.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/run/result_document.hpp"
#include "expctl/store/types.hpp"
#include "expctl/sweep_run/child.hpp"
#include "expctl/sweep_run/slurm_array.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/interrupt_signals.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep_run {

using sweep::Job;
using sweep::Point;
using sweep::Slot;
using sweep::Sweep;

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

namespace {

/// Exit codes of a point that stop the sweep: every later point would fail the same way.
bool stops_sweep(int exit_code) {
  return exit_code == 2 || exit_code == 3;
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string last_line(const fs::path& log) {
  std::ifstream file(log);
  std::string line;
  std::string last;
  while (std::getline(file, line)) {
    if (!util::trim(line).empty()) {
      last = line;
    }
  }
  return last;
}

// The run a point recorded, from the document its `expctl run --format json` printed (the run
// engine's one codec, run/result_document.hpp); empty when it printed none.
std::string run_id_of(const fs::path& json_output) {
  const auto text = util::read_file(json_output);
  if (!text) {
    return "";
  }
  const auto document = run::decode_result(*text);
  return document ? document->run_id : "";
}

std::vector<std::string> environment_of(const std::map<std::string, std::string>& base, const Slot& slot) {
  std::map<std::string, std::string> merged = base;
  if (!slot.gpus.empty()) {
    merged["CUDA_VISIBLE_DEVICES"] = util::join(slot.gpus, ",");
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : merged) {
    out.push_back(name + "=" + value);
  }
  return out;
}

// One job that is running.
struct Active {
  Job job;
  size_t slot = 0;
  std::unique_ptr<detail::Child> child;
  SteadyClock::time_point start;
  fs::path log;
  fs::path output;
};

class Runner {
 public:
  Runner(const Sweep& sweep, std::span<const Job> jobs, const RunnerOptions& options)
      : m_sweep(sweep), m_jobs(jobs), m_options(options), m_active(options.slots.size()) {}

  RunnerResult run() {
    util::InterruptSignals signals;
    m_start = SteadyClock::now();
    while ((queued() > 0 && !m_stopping) || running() > 0) {
      fill_slots();
      wait(signals);
      on_signals(signals.take());
      reap();
      redraw();
    }
    m_result.not_started = queued();
    return std::move(m_result);
  }

 private:
  size_t running() const {
    return static_cast<size_t>(
        std::count_if(m_active.begin(), m_active.end(), [](const auto& a) { return a.has_value(); }));
  }

  size_t queued() const { return m_jobs.size() - m_next + m_reruns.size(); }

  // A point whose resume was refused runs anew first; then the jobs in order.
  Job next_job() {
    if (!m_reruns.empty()) {
      Job job = m_reruns.front();
      m_reruns.pop_front();
      return job;
    }
    return m_jobs[m_next++];
  }

  void fill_slots() {
    for (size_t slot = 0; slot < m_active.size(); ++slot) {
      if (!m_active[slot] && queued() > 0 && !m_stopping) {
        start(next_job(), slot);
      }
    }
  }

  // point-<I>.log, or point-<I>-<k>.log for the k-th job of a point repeated in this invocation.
  fs::path log_stem(const Job& job) {
    const size_t k = m_jobs_of_point[job.point]++;
    const std::string stem =
        m_sweep.repeat == 1 ? fmt::format("point-{}", job.point) : fmt::format("point-{}-{}", job.point, k);
    return m_options.log_dir / stem;
  }

  void start(const Job& job, size_t slot) {
    std::error_code error;
    fs::create_directories(m_options.log_dir, error);
    EXPCTL_CHECK(!error, util::LaunchError, "cannot create the sweep's log folder {}: {}", m_options.log_dir.string(),
                 error.message());
    const fs::path stem = log_stem(job);
    Active active{job, slot, nullptr, SteadyClock::now(), stem.string() + ".log", stem.string() + ".json"};
    const std::vector<std::string> argv = job_argv(m_sweep, job, m_options);
    std::ofstream(active.log, std::ios::app)
        << fmt::format("=== {} {}\n", store::format_utc(store::Clock::now()), util::join(argv, " "));
    const Slot& where = m_options.slots[slot];
    active.child = std::make_unique<detail::Child>(
        detail::ChildSpec{argv, environment_of(m_options.environment, where), where.cpus, active.output, active.log});
    event(fmt::format("point {} ({}): {} in slot {} (cpus {})", job.point, point_label(m_sweep.points[job.point]),
                      job.resume_run.empty() ? "started" : "resuming run " + job.resume_run, slot,
                      sweep::cpu_list_text(where.cpus)));
    m_active[slot] = std::move(active);
  }

  // Until a signal arrives, a point ends (its pidfd turns readable) or the progress line is due.
  void wait(const util::InterruptSignals& signals) const {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (const auto& active : m_active) {
      if (active && active->child->pidfd() >= 0) {
        fds.push_back({active->child->pidfd(), POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(m_options.redraw_every.count()));
  }

  void on_signals(const std::vector<int>& signals) {
    for (const int signal : signals) {
      if (!m_stopping) {
        event(
            fmt::format("sweep: {} received: no new point starts; the running ones checkpoint and stop (run the "
                        "sweep again to resume them)",
                        ::sigabbrev_np(signal) != nullptr ? std::string("SIG") + ::sigabbrev_np(signal) : "signal"));
      }
      m_stopping = true;
      m_result.interrupted = true;
      for (auto& active : m_active) {
        if (active) {
          active->child->signal(signal);
        }
      }
    }
  }

  void reap() {
    for (auto& active : m_active) {
      if (!active) {
        continue;
      }
      if (const auto code = active->child->poll()) {
        finish(*active, *code);
        active.reset();
      }
    }
  }

  void finish(const Active& active, int exit_code) {
    JobOutcome outcome{active.job, active.slot, exit_code, run_id_of(active.output), seconds_since(active.start),
                       active.log};
    if (outcome.run_id.empty()) {
      outcome.run_id = active.job.resume_run;
    }
    m_finished_s.push_back(outcome.seconds);
    event(outcome_line(outcome));
    if (refused_resume(outcome)) {
      // Its checkpoints are unusable (or it is not resumable any more): the point starts anew.
      event(fmt::format("point {}: run {} cannot be resumed (see its log): the point starts anew", outcome.job.point,
                        outcome.job.resume_run));
      m_reruns.push_back({outcome.job.point, ""});
    } else if (stops_sweep(exit_code) && !m_stopping) {
      m_stopping = true;
      m_result.stopped_by_exit = exit_code;
      event(fmt::format("sweep: stopping: point {} exited {}, and every later point would too", outcome.job.point,
                        exit_code));
    }
    m_result.outcomes.push_back(std::move(outcome));
  }

  bool refused_resume(const JobOutcome& outcome) const {
    return !outcome.job.resume_run.empty() && outcome.exit_code == 2 && !m_stopping;
  }

  std::string outcome_line(const JobOutcome& outcome) const {
    const std::string run = outcome.run_id.empty() ? "" : ", run " + outcome.run_id;
    if (outcome.exit_code == 0) {
      return fmt::format("point {} completed in {}{}", outcome.job.point, duration_text(outcome.seconds), run);
    }
    const std::string verb =
        outcome.exit_code == 130 ? "interrupted" : fmt::format("failed (exit {})", outcome.exit_code);
    return fmt::format("point {} {} after {}{}: {} (log: {})", outcome.job.point, verb, duration_text(outcome.seconds),
                       run, last_line(outcome.log), outcome.log.string());
  }

  void event(const std::string& line) const {
    if (m_options.progress) {
      m_options.progress(line, false);
    }
  }

  void redraw() {
    if (!m_options.progress) {
      return;
    }
    ProgressState state;
    state.total = m_options.total_runs;
    state.running = running();
    for (const JobOutcome& outcome : m_result.outcomes) {
      (outcome.exit_code == 0 ? state.done : state.failed) += outcome.exit_code == 130 ? 0 : 1;
    }
    state.done += m_options.done_before;
    state.elapsed_s = seconds_since(m_start);
    std::vector<double> running_s;
    for (const auto& active : m_active) {
      if (active) {
        running_s.push_back(seconds_since(active->start));
      }
    }
    state.eta_s = estimate_eta(m_finished_s, running_s, m_stopping ? 0 : queued(), m_active.size());
    m_options.progress(progress_line(m_sweep.name, state), true);
  }

  const Sweep& m_sweep;
  std::span<const Job> m_jobs;
  const RunnerOptions& m_options;
  std::vector<std::optional<Active>> m_active;
  std::map<size_t, size_t> m_jobs_of_point;
  size_t m_next = 0;
  std::deque<Job> m_reruns;
  bool m_stopping = false;
  SteadyClock::time_point m_start;
  std::vector<double> m_finished_s;
  RunnerResult m_result;
};

}  // namespace

std::vector<std::string> job_argv(const Sweep& sweep, const Job& job, const RunnerOptions& options) {
  std::vector<std::string> argv{options.executable.string()};
  argv.insert(argv.end(), options.global_args.begin(), options.global_args.end());
  if (!job.resume_run.empty()) {
    argv.insert(argv.end(), {"resume", job.resume_run, "--format", "json"});
    return argv;
  }
  const Point& point = sweep.points.at(job.point);
  argv.insert(argv.end(), {"run", sweep.base.string()});
  for (const std::string& override_text : point.overrides) {
    argv.insert(argv.end(), {"--set", override_text});
  }
  for (const std::string& tag : {name_tag(sweep), hash_tag(sweep), point_tag(point)}) {
    argv.insert(argv.end(), {"--tag", tag});
  }
  if (const auto slurm_job = slurm_job_tag()) {  // an array task's run says which task made it
    argv.insert(argv.end(), {"--tag", *slurm_job});
  }
  argv.insert(argv.end(), {"--format", "json"});
  return argv;
}

RunnerResult run_jobs(const Sweep& sweep, std::span<const Job> jobs, const RunnerOptions& options) {
  EXPCTL_ASSERT(!options.slots.empty(), "a sweep needs at least one slot");
  return Runner(sweep, jobs, options).run();
}

double estimate_eta(std::span<const double> finished_s, std::span<const double> running_elapsed_s, size_t queued,
                    size_t slots) {
  if (finished_s.empty() || slots == 0) {
    return -1;
  }
  const double mean =
      std::accumulate(finished_s.begin(), finished_s.end(), 0.0) / static_cast<double>(finished_s.size());
  double work = mean * static_cast<double>(queued);
  for (const double elapsed : running_elapsed_s) {
    work += std::max(0.0, mean - elapsed);
  }
  return work / static_cast<double>(slots);
}

std::string progress_line(const std::string& sweep_name, const ProgressState& state) {
  std::string line =
      fmt::format("sweep {}: {}/{} runs done, {} running", sweep_name, state.done, state.total, state.running);
  if (state.failed > 0) {
    line += fmt::format(", {} failed", state.failed);
  }
  return line + fmt::format(", elapsed {}, eta {}", duration_text(state.elapsed_s),
                            state.eta_s < 0 ? std::string("-") : duration_text(state.eta_s));
}

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return "-";
  }
  if (seconds < 1) {
    return fmt::format("{}ms", static_cast<int>(seconds * 1000));
  }
  if (seconds < 60) {
    return fmt::format("{:.1f}s", seconds);
  }
  const auto whole = static_cast<long>(seconds);
  if (whole < 3600) {
    return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  }
  return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
}

ProgressSink stream_progress(std::ostream& out, bool tty) {
  auto last = std::make_shared<std::string>();
  return [&out, tty, last](const std::string& line, bool redraw) {
    if (tty) {
      out << "\r\033[K" << line << (redraw ? "" : "\n") << std::flush;
      if (!redraw && !last->empty()) {
        out << *last << std::flush;
      }
      if (redraw) {
        *last = line;
      }
      return;
    }
    const std::string counts = line.substr(0, line.find(", elapsed"));
    if (!redraw || counts != *last) {
      out << line << '\n';
    }
    if (redraw) {
      *last = counts;
    }
  };
}

}  // namespace expctl::sweep_run
