#include "expctl/launch/signal_pipe.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <unistd.h>

#include "expctl/util/error.hpp"

namespace expctl::launch::detail {

namespace {

constexpr std::array<int, 3> k_interrupt_signals = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> g_write_fd{-1};
std::array<struct sigaction, k_interrupt_signals.size()> g_previous{};

extern "C" void on_interrupt_signal(int signal) {
  const int saved_errno = errno;
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] const ssize_t ignored = ::write(fd, &byte, 1);  // a full pipe already says "signalled"
  }
  errno = saved_errno;
}

}  // namespace

InterruptSignals::InterruptSignals() {
  int fds[2];
  EXPCTL_ASSERT(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "cannot create the signal pipe");
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    EXPCTL_ASSERT(false, "two supervisors handle signals at once");
  }
  m_read_fd = fds[0];
  struct sigaction action {};
  action.sa_handler = on_interrupt_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: poll() must return with EINTR
  for (size_t i = 0; i < k_interrupt_signals.size(); ++i) {
    ::sigaction(k_interrupt_signals[i], &action, &g_previous[i]);
  }
}

InterruptSignals::~InterruptSignals() {
  for (size_t i = 0; i < k_interrupt_signals.size(); ++i) {
    ::sigaction(k_interrupt_signals[i], &g_previous[i], nullptr);
  }
  ::close(g_write_fd.exchange(-1));
  ::close(m_read_fd);
}

std::vector<int> InterruptSignals::take() {
  std::vector<int> signals;
  unsigned char byte = 0;
  while (::read(m_read_fd, &byte, 1) == 1) {
    signals.push_back(byte);
  }
  return signals;
}

}  // namespace expctl::launch::detail
