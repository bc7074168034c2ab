#include "expctl/sweep_run/child.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/util/error.hpp"

namespace expctl::sweep_run::detail {

namespace {

/// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

int open_output(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw util::Failure(fmt::format("cannot open {} for a point's output: {}", path.string(), std::strerror(errno)),
                        util::ExitCode::run_failed);
  }
  return fd;
}

}  // namespace

Child::Child(const ChildSpec& spec) {
  const Fd null{::open("/dev/null", O_RDONLY | O_CLOEXEC)};
  const Fd out{open_output(spec.stdout_path, O_WRONLY | O_CREAT | O_TRUNC)};
  const Fd err{open_output(spec.stderr_path, O_WRONLY | O_CREAT | O_APPEND)};
  auto started = util::ChildProcess::spawn({.argv = spec.argv,
                                            .environment = spec.environment,
                                            .fds = {null.fd, out.fd, err.fd},
                                            .cpus = spec.cpus,
                                            .death_signal = SIGTERM});
  if (!started) {
    const util::SpawnError& error = started.error();
    EXPCTL_CHECK(error.call == "exec", util::LaunchError, "cannot start a point: {}: {}", error.call,
                 std::strerror(error.error));
    throw util::LaunchError(fmt::format("cannot execute {}: {}", spec.argv.front(), std::strerror(error.error)));
  }
  m_process = std::move(*started);
}

std::optional<int> Child::poll() {
  const auto status = m_process.try_wait();
  return status ? std::optional<int>(util::exit_code_of_status(*status)) : std::nullopt;
}

void Child::signal(int signal) const {
  m_process.signal_group(signal);
}

}  // namespace expctl::sweep_run::detail
