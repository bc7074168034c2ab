#include "expctl/sweep/child.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "expctl/util/error.hpp"

namespace expctl::sweep::detail {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& text : strings) {
    out.push_back(const_cast<char*>(text.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

int open_output(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) {
    throw util::Failure(fmt::format("cannot open {} for a point's output: {}", path.string(), std::strerror(errno)),
                        util::ExitCode::run_failed);
  }
  return fd;
}

// After fork, before exec: only async-signal-safe calls. Reports errno on `report` on failure.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, const cpu_set_t* cpus, pid_t parent, int out,
                             int err, int report) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) {
    ::_exit(127);  // the sweep died before the death signal was armed
  }
  unblock_all_signals();
  const int null = ::open("/dev/null", O_RDONLY);
  const bool ok = null >= 0 && ::dup2(null, STDIN_FILENO) >= 0 && ::dup2(out, STDOUT_FILENO) >= 0 &&
                  ::dup2(err, STDERR_FILENO) >= 0 && (cpus == nullptr || ::sched_setaffinity(0, sizeof(*cpus), cpus) == 0);
  if (ok) {
    ::execve(argv[0], argv, envp);
  }
  const int code = errno;
  [[maybe_unused]] const auto written = ::write(report, &code, sizeof code);
  ::_exit(127);
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void unblock_all_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

Child::Child(const ChildSpec& spec) {
  const auto argv = c_strings(spec.argv);
  const auto envp = c_strings(spec.environment);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (const int cpu : spec.cpus) {
    CPU_SET(cpu, &cpus);
  }
  const int out = open_output(spec.stdout_path, O_TRUNC);
  const int err = open_output(spec.stderr_path, O_APPEND);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(out);
    ::close(err);
    throw util::Failure(fmt::format("cannot start a point: pipe: {}", std::strerror(errno)), util::ExitCode::run_failed);
  }
  const pid_t parent = ::getpid();
  m_pid = ::fork();
  if (m_pid == 0) {
    exec_child(argv.data(), envp.data(), spec.cpus.empty() ? nullptr : &cpus, parent, out, err, report[1]);
  }
  const int fork_error = errno;
  if (m_pid > 0) {
    ::setpgid(m_pid, m_pid);  // also here: a signal sent before the child ran setpgid must reach its group
  }
  ::close(out);
  ::close(err);
  ::close(report[1]);
  int exec_error = 0;
  const bool failed = m_pid > 0 && ::read(report[0], &exec_error, sizeof exec_error) == sizeof exec_error;
  ::close(report[0]);
  EXPCTL_CHECK(m_pid > 0, util::LaunchError, "cannot start a point: fork: {}", std::strerror(fork_error));
  if (failed) {
    ::waitpid(m_pid, nullptr, 0);
    m_exit = 127;
    throw util::LaunchError(fmt::format("cannot execute {}: {}", spec.argv.front(), std::strerror(exec_error)));
  }
}

Child::~Child() {
  if (m_pid > 0 && !m_exit) {
    ::kill(-m_pid, SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
  }
}

std::optional<int> Child::poll() {
  if (!m_exit) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_exit = exit_code_of(status);
    }
  }
  return m_exit;
}

void Child::signal(int signal) const {
  if (!m_exit) {
    ::kill(-m_pid, signal);
  }
}

}  // namespace expctl::sweep::detail
