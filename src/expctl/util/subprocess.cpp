#include "expctl/util/subprocess.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "expctl/util/spawn.hpp"

extern char** environ;

namespace expctl::util {

namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int& f : fd) {
      if (f >= 0) {
        ::close(f);
      }
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) {
      ::close(fd[i]);
      fd[i] = -1;
    }
  }
};

// The child's environment, built in the parent: after fork only async-signal-safe calls are allowed.
std::vector<std::string> build_environment(const SubprocessOptions& options) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) {
      merged[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [name, value] : options.env) {
    if (value) {
      merged[name] = *value;
    } else {
      merged.erase(name);
    }
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : merged) {
    out.push_back(name + "=" + value);
  }
  return out;
}

}  // namespace

Expected<SubprocessResult> run_capture(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  if (argv.empty()) {
    return make_error("run_capture: empty command line");
  }
  Pipe in, out, err;
  if (::pipe2(in.fd, O_CLOEXEC) != 0 || ::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
    return make_error(fmt::format("cannot create pipes: {}", std::strerror(errno)));
  }
  auto child = ChildProcess::spawn({.argv = argv,
                                    .environment = build_environment(options),
                                    .fds = {in.fd[0], out.fd[1], err.fd[1]},
                                    .working_directory = options.working_directory});
  if (!child) {
    if (child.error().call != "exec") {
      return make_error(
          fmt::format("cannot start \"{}\": {}: {}", argv[0], child.error().call, std::strerror(child.error().error)));
    }
    // As a shell reports a program it cannot run.
    SubprocessResult result;
    result.exit_code = 127;
    result.err = fmt::format("run_capture: exec failed: {}\n", std::strerror(child.error().error));
    return result;
  }
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);

  SubprocessResult result;
  size_t stdin_written = 0;
  if (options.stdin_data.empty()) {
    in.close_end(1);
  } else {
    ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);
  }
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::array<char, 65536> buffer{};
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    std::vector<pollfd> fds;
    if (out.fd[0] >= 0) fds.push_back({out.fd[0], POLLIN, 0});
    if (err.fd[0] >= 0) fds.push_back({err.fd[0], POLLIN, 0});
    if (in.fd[1] >= 0) fds.push_back({in.fd[1], POLLOUT, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      child->signal_group(SIGKILL);
      break;
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      break;
    }
    for (const pollfd& p : fds) {
      if (p.revents == 0) {
        continue;
      }
      if (p.fd == in.fd[1]) {
        const ssize_t n = ::write(p.fd, options.stdin_data.data() + stdin_written, options.stdin_data.size() - stdin_written);
        if (n > 0) stdin_written += static_cast<size_t>(n);
        if (n < 0 || stdin_written == options.stdin_data.size()) in.close_end(1);
        continue;
      }
      const ssize_t n = ::read(p.fd, buffer.data(), buffer.size());
      std::string& sink = (p.fd == out.fd[0]) ? result.out : result.err;
      if (n > 0) {
        sink.append(buffer.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        (p.fd == out.fd[0]) ? out.close_end(0) : err.close_end(0);
      }
    }
  }
  const int status = child->wait();
  // The child may have left grandchildren in its group: they are ours to clean up.
  child->kill_group_and_reap();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace expctl::util
