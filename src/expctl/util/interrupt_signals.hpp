#pragma once
/// The one way expctl handles SIGINT, SIGTERM and SIGHUP (the signals that ask it to stop): while
/// an InterruptSignals exists, each arrival becomes a byte on a pipe (the self-pipe trick), so a
/// poll() loop (the supervisor's, the sweep's) sees it like any other input, after an optional
/// async-signal-safe hook has run (a rank's stop flag, run/stop.hpp). Handlers, not a
/// signalfd: a signalfd needs the signals blocked in every thread, and the processes that
/// supervise also run threads (the recorder, the plugin's loader) that would take them instead.

#include <array>
#include <csignal>
#include <vector>

namespace expctl::util {

inline constexpr std::array<int, 3> k_interrupt_signals = {SIGINT, SIGTERM, SIGHUP};

/// Installs the handlers for its lifetime and restores the previous ones afterwards. At most one
/// may exist per process (the handlers are process-wide); a second throws util::InternalError.
class InterruptSignals {
 public:
  /// Runs inside the signal handler: async-signal-safe calls only.
  using Hook = void (*)(int signal);

  explicit InterruptSignals(Hook hook = nullptr);
  ~InterruptSignals();
  InterruptSignals(const InterruptSignals&) = delete;
  InterruptSignals& operator=(const InterruptSignals&) = delete;

  /// Readable when a signal has arrived.
  int fd() const { return m_read_fd; }
  /// The signals received since the last call, in arrival order.
  std::vector<int> take();

 private:
  int m_read_fd = -1;
};

}  // namespace expctl::util
