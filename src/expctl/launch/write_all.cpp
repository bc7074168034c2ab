#include "expctl/launch/write_all.hpp"

#include <cerrno>
#include <csignal>
#include <ctime>

#include <pthread.h>
#include <unistd.h>

namespace expctl::launch {

bool write_all_ignoring_sigpipe(int fd, std::string_view data) {
  sigset_t pipe_set;
  sigset_t old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  bool ok = true;
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ok = false;
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (!ok && errno == EPIPE) {
    const timespec no_wait{0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &no_wait) == SIGPIPE) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return ok;
}

}  // namespace expctl::launch
