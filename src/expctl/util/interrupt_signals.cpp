#include "expctl/util/interrupt_signals.hpp"

#include <atomic>
#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "expctl/util/error.hpp"

namespace expctl::util {

namespace {

std::atomic<int> g_write_fd{-1};
std::atomic<InterruptSignals::Hook> g_hook{nullptr};
std::array<struct sigaction, k_interrupt_signals.size()> g_previous{};

extern "C" void on_interrupt_signal(int signal) {
  const int saved_errno = errno;
  if (const InterruptSignals::Hook hook = g_hook.load()) {
    hook(signal);
  }
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] const ssize_t ignored = ::write(fd, &byte, 1);  // a full pipe already says "signalled"
  }
  errno = saved_errno;
}

}  // namespace

InterruptSignals::InterruptSignals(Hook hook) {
  int fds[2];
  EXPCTL_ASSERT(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "cannot create the signal pipe");
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    EXPCTL_ASSERT(false, "two owners of the interrupt signals at once");
  }
  m_read_fd = fds[0];
  g_hook.store(hook);
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
  g_hook.store(nullptr);
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

}  // namespace expctl::util
