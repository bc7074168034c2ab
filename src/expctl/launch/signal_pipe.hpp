#pragma once
/// Internal to the supervisor: SIGINT, SIGTERM and SIGHUP turned into bytes on a pipe (the
/// self-pipe trick), so the supervisor's poll() loop sees them like any other input.

#include <vector>

namespace expctl::launch::detail {

/// Installs the handlers for its lifetime and restores the previous ones afterwards. At most one
/// may exist per process (the handlers are process-wide); a second throws util::InternalError.
class InterruptSignals {
 public:
  InterruptSignals();
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

}  // namespace expctl::launch::detail
