#include "expctl/launch/supervisor.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>

#include <poll.h>

#include <fmt/format.h>

#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/process_usage.hpp"
#include "expctl/launch/rank_process.hpp"
#include "expctl/launch/shm_segments.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/interrupt_signals.hpp"

namespace expctl::launch {

namespace {

using detail::Clock;
using detail::RankProcess;
using std::chrono::milliseconds;

// Upper bound on one poll(): ranks are reaped on this tick even when a grandchild keeps their
// pipes open (so no end-of-file wakes us), and it bounds how late a timer fires.
constexpr milliseconds k_poll_tick{50};
// A protocol-speaking rank silent this long while a peer fails is taken for the one that stopped.
constexpr milliseconds k_silent_peer{3000};

std::string format_duration(milliseconds duration) {
  if (duration.count() % 1000 == 0) {
    return fmt::format("{} s", duration.count() / 1000);
  }
  return fmt::format("{:.1f} s", static_cast<double>(duration.count()) / 1000.0);
}

void write_to_stderr(std::string_view line) {
  std::string text(line);
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace

std::vector<RankSpec> rank_specs(const LaunchPlan& plan, const std::vector<std::string>& argv) {
  std::vector<RankSpec> specs;
  for (const PlannedRank& planned : plan.ranks) {
    specs.push_back({planned.rank, argv, planned.env, {}, ControlProtocol::expctl});
  }
  return specs;
}

struct Supervisor::State {
  SupervisorOptions options;
  std::vector<std::unique_ptr<RankProcess>> ranks;
  Clock::time_point started = Clock::now();
  std::optional<RunStatus> verdict;  // set by the first failure or interrupt; never changed after
  std::optional<RootCause> root_cause;
  std::optional<int> interrupt_signal;
  std::optional<Clock::time_point> kill_at;  // when stopping ranks escalates to SIGKILL
  bool killed = false;
  // Installed by start(), before the first rank exists, so an early Ctrl-C is not lost (nor
  // kills the supervisor with the default action); removed when wait() returns.
  std::optional<util::InterruptSignals> signals;
  UsageRate usage;
  GpuUsage gpu_usage;
  Clock::time_point next_usage = Clock::now();

  // The log folder, the signal handlers and the clock: what every start has in common.
  detail::RankSinks prepare_start() {
    EXPCTL_ASSERT(ranks.empty(), "Supervisor::start called twice");
    if (!options.log_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(options.log_dir, error);
      if (error) {
        throw util::LaunchError(
            fmt::format("cannot create the log folder {}: {}", options.log_dir.string(), error.message()));
      }
    }
    if (options.handle_signals) {
      signals.emplace();
    }
    started = Clock::now();
    return {&options.console, &options.on_record, options.tail_lines};
  }

  bool any_running() const {
    return std::any_of(ranks.begin(), ranks.end(), [](const auto& r) { return r->running(); });
  }

  void signal_all(int signal) {
    for (auto& rank : ranks) rank->signal_group(signal);
  }

  void stop(milliseconds grace) {
    signal_all(SIGTERM);
    kill_at = Clock::now() + grace;
  }

  void escalate() {
    signal_all(SIGKILL);
    killed = true;
  }

  void fail(const RankProcess* rank, std::string description) {
    if (verdict) {
      return;  // a consequence of the first failure, not a cause
    }
    verdict = RunStatus::failed;
    root_cause = RootCause{rank ? std::optional<int>(rank->rank()) : std::nullopt, std::move(description),
                           rank ? rank->last_lines() : std::vector<std::string>{}, heartbeats()};
    stop(options.grace_period);
  }

  std::map<int, std::string> heartbeats() const {
    std::map<int, std::string> where;
    for (const auto& rank : ranks) {
      if (!rank->last_heartbeat().empty()) {
        where[rank->rank()] = rank->last_heartbeat();
      }
    }
    return where;
  }

  // A rank that stopped answering, before anything is stopped: its stack can still be read.
  void fail_unresponsive(const RankProcess& rank, std::string description) {
    if (verdict) {
      return;
    }
    if (options.on_unresponsive) {
      options.on_unresponsive(rank.rank(), rank.pid());
    }
    fail(&rank, std::move(description));
  }

  void interrupt(int signal) {
    if (!interrupt_signal) {
      interrupt_signal = signal;  // during a failure's grace period too: a run its user stopped is not restarted
    }
    if (verdict) {
      escalate();  // a second interrupt (or one during a failure's grace period): no more waiting
      return;
    }
    verdict = RunStatus::interrupted;
    stop(options.interrupt_grace);
  }

  void on_rank_ended(const RankProcess& rank) {
    const RankExit& exit = rank.exit();
    if (verdict || (exit.signal == 0 && exit.exit_code == 0)) {
      return;
    }
    const std::string description = fmt::format("rank {} {}", rank.rank(), describe(exit));
    if (exit.signal == 0 && exit.exit_code == k_interrupted_exit_code) {
      // The rank was asked to stop by someone else (a scheduler's SIGTERM, say) and checkpointed:
      // stop the others the same way, so the run can be resumed.
      verdict = RunStatus::interrupted;
      root_cause = RootCause{rank.rank(), description, rank.last_lines(), {}};
      stop(options.interrupt_grace);
      return;
    }
    if (const RankProcess* silent = silent_peer(rank)) {
      // A peer that stopped answering makes the others' collectives fail (or time out): the
      // silent one is the cause, whatever the collective timeout, and the failing one its victim.
      fail_unresponsive(*silent, fmt::format("rank {} stopped answering (no heartbeat for {}); rank {} {} while "
                                             "waiting for it",
                                             silent->rank(), format_duration(silence_of(*silent)), rank.rank(),
                                             describe(exit)));
      return;
    }
    fail(&rank, description);
  }

  bool judged(const RankProcess& rank) const {
    return !options.silence_counts_after_first_line || rank.spoke();
  }

  milliseconds silence_of(const RankProcess& rank) const {
    return std::chrono::duration_cast<milliseconds>(Clock::now() - rank.last_alive());
  }

  // A running rank other than `failed` that has been silent for k_silent_peer (ranks beat every
  // second, from a thread of their own, even while blocked in a collective).
  const RankProcess* silent_peer(const RankProcess& failed) const {
    if (options.heartbeat_timeout.count() <= 0) {
      return nullptr;  // ranks that do not speak the protocol
    }
    const RankProcess* silent = nullptr;
    for (const auto& rank : ranks) {
      if (rank.get() != &failed && rank->running() && judged(*rank) && silence_of(*rank) >= k_silent_peer &&
          (silent == nullptr || rank->last_alive() < silent->last_alive())) {
        silent = rank.get();
      }
    }
    return silent;
  }

  void check_timers(Clock::time_point now) {
    if (kill_at && now >= *kill_at && !killed) {
      escalate();
    }
    if (options.run_timeout.count() > 0 && now - started >= options.run_timeout) {
      fail(nullptr, fmt::format("the run timed out after {}", format_duration(options.run_timeout)));
    }
    if (!verdict && options.abort_check) {
      if (auto reason = options.abort_check()) {
        fail(nullptr, std::move(*reason));
        return;
      }
    }
    if (verdict || options.heartbeat_timeout.count() <= 0) {
      return;
    }
    for (const auto& rank : ranks) {
      if (rank->running() && judged(*rank) && now - rank->last_alive() >= options.heartbeat_timeout) {
        fail_unresponsive(*rank, fmt::format("rank {} stopped answering (no heartbeat for {})", rank->rank(),
                                             format_duration(options.heartbeat_timeout)));
        return;
      }
    }
  }

  milliseconds poll_timeout(Clock::time_point now) const {
    auto timeout = k_poll_tick;
    if (kill_at && !killed) {
      timeout = std::min(timeout, std::chrono::duration_cast<milliseconds>(*kill_at - now));
    }
    if (reads_usage()) {
      timeout = std::min(timeout, std::chrono::duration_cast<milliseconds>(next_usage - now));
    }
    return std::max(timeout, milliseconds(0));
  }

  bool reads_usage() const { return options.on_usage && options.usage_every.count() > 0; }

  // Every usage_every: each running rank's CPU and memory, from /proc (a few small reads a rank),
  // and with NVIDIA's driver its GPU memory and utilization (one NVML reading for every rank).
  void read_usage(Clock::time_point now) {
    if (!reads_usage() || now < next_usage) {
      return;
    }
    next_usage = now + options.usage_every;
    const auto gpu = gpu_usage.read();
    for (const auto& rank : ranks) {
      if (!rank->running()) {
        continue;
      }
      if (const auto sample = usage.read(rank->rank(), rank->pid(), now, gpu ? &*gpu : nullptr)) {
        options.on_usage(rank->rank(), *sample);
      }
    }
  }

  void reap() {
    std::vector<const RankProcess*> ended;
    for (auto& rank : ranks) {
      if (rank->try_reap())
        ended.push_back(rank.get());
    }
    // Ranks that ended within one tick cannot be ordered by time. A crash (death by a signal)
    // is the likelier cause and a peer's error exit ("connection closed") its consequence.
    std::stable_partition(ended.begin(), ended.end(), [](const RankProcess* r) { return r->exit().signal != 0; });
    for (const RankProcess* rank : ended) {
      on_rank_ended(*rank);
      if (options.on_rank_exit)
        options.on_rank_exit(rank->exit());
    }
  }

  void poll_once() {
    std::vector<pollfd> fds;
    std::vector<std::pair<RankProcess*, RankProcess::Channel>> sources;
    if (signals)
      fds.push_back({signals->fd(), POLLIN, 0});
    for (auto& rank : ranks) {
      std::vector<RankProcess::Channel> channels;
      rank->add_poll_fds(fds, channels);
      for (const auto channel : channels) sources.emplace_back(rank.get(), channel);
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(poll_timeout(Clock::now()).count()));
    if (ready <= 0) {
      return;  // timeout, or EINTR from a signal whose byte the next round reads
    }
    const size_t first_rank_fd = signals ? 1 : 0;
    if (signals && fds[0].revents != 0) {
      for (const int signal : signals->take()) interrupt(signal);
    }
    for (size_t i = first_rank_fd; i < fds.size(); ++i) {
      if (fds[i].revents != 0) {
        auto [rank, channel] = sources[i - first_rank_fd];
        rank->on_readable(channel);
      }
    }
  }
};

Supervisor::Supervisor(SupervisorOptions options) : m_state(std::make_unique<State>()) {
  m_state->options = std::move(options);
  if (!m_state->options.console) {
    m_state->options.console = write_to_stderr;
  }
}

Supervisor::~Supervisor() = default;  // each RankProcess kills and reaps its own process

namespace {

std::vector<std::string> rank_environment(const EnvMap& base, const RankSpec& spec) {
  EnvOverrides env = spec.env;
  env[k_control_fd_variable] = std::to_string(k_control_fd);
  return merged_environment(base, env);
}

}  // namespace

HeldRanks::HeldRanks(const std::vector<RankSpec>& ranks, const std::optional<EnvMap>& environment) {
  const EnvMap base = environment ? *environment : current_environment();
  for (const RankSpec& spec : ranks) {
    auto process = std::make_unique<RankProcess>(spec, detail::RankSinks{}, std::filesystem::path());
    process->spawn(rank_environment(base, spec), true);
    m_ranks.push_back(std::move(process));
  }
}

HeldRanks::~HeldRanks() = default;  // each RankProcess kills and reaps its own process
HeldRanks::HeldRanks(HeldRanks&& other) noexcept = default;
HeldRanks& HeldRanks::operator=(HeldRanks&& other) noexcept = default;

std::vector<pid_t> HeldRanks::pids() const {
  std::vector<pid_t> out;
  for (const auto& rank : m_ranks) out.push_back(rank->pid());
  return out;
}

void Supervisor::start(const std::vector<RankSpec>& ranks) {
  State& state = *m_state;
  const detail::RankSinks sinks = state.prepare_start();
  const EnvMap base = state.options.environment ? *state.options.environment : current_environment();
  for (const RankSpec& spec : ranks) {
    auto process = std::make_unique<RankProcess>(spec, sinks, state.options.log_dir);
    process->spawn(rank_environment(base, spec));
    state.ranks.push_back(std::move(process));
  }
}

void Supervisor::start(HeldRanks&& held, std::string_view line) {
  State& state = *m_state;
  const detail::RankSinks sinks = state.prepare_start();
  for (auto& process : held.m_ranks) {
    process->attach(sinks, state.options.log_dir);
    state.ranks.push_back(std::move(process));
  }
  held.m_ranks.clear();
  for (auto& process : state.ranks) {
    process->release(line);
  }
}

Outcome Supervisor::wait() {
  State& state = *m_state;
  while (true) {
    state.reap();
    if (!state.any_running()) {
      break;
    }
    state.check_timers(Clock::now());
    state.read_usage(Clock::now());
    state.poll_once();
  }
  // Every rank has ended: a signal arriving now changes nothing about this run.
  state.signals.reset();
  Outcome outcome;
  outcome.status = state.verdict.value_or(RunStatus::completed);
  outcome.root_cause = state.root_cause;
  outcome.interrupt_signal = state.interrupt_signal;
  std::vector<pid_t> pids;
  for (const auto& rank : state.ranks) {
    rank->kill_and_reap();  // grandchildren a rank left behind in its group
    outcome.ranks.push_back(rank->exit());
    pids.push_back(rank->pid());
  }
  remove_shm_segments(pids);  // of a rank killed while its host's ranks were still joining
  outcome.wall_time = std::chrono::duration_cast<milliseconds>(Clock::now() - state.started);
  return outcome;
}

Outcome Supervisor::run(const std::vector<RankSpec>& ranks) {
  start(ranks);
  return wait();
}

std::vector<pid_t> Supervisor::pids() const {
  std::vector<pid_t> out;
  for (const auto& rank : m_state->ranks) out.push_back(rank->pid());
  return out;
}

}  // namespace expctl::launch
