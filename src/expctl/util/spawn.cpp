#include "expctl/util/spawn.hpp"

#include <cerrno>
#include <csignal>
#include <utility>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>
#include <sched.h>

#include "expctl/util/sandbox.hpp"

namespace expctl::util {

namespace {

constexpr int k_exec_failed_exit = 127;

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& text : strings) {
    out.push_back(text.data());
  }
  out.push_back(nullptr);
  return out;
}

/// Everything the child needs, prepared by the parent: after fork only async-signal-safe calls.
struct Prepared {
  char* const* argv;
  char* const* envp;
  std::vector<int> fds;   ///< the caller's descriptors, then the exec-status pipe's write end
  const char* workdir;    ///< nullptr: inherited
  const cpu_set_t* cpus;  ///< nullptr: inherited
  int death_signal;
  pid_t parent;
  int sandbox_ruleset;  ///< -1: none
};

[[noreturn]] void report_exec_error(int fd) {
  const int error = errno;
  [[maybe_unused]] const ssize_t ignored = ::write(fd, &error, sizeof error);
  ::_exit(k_exec_failed_exit);
}

[[noreturn]] void run_child(Prepared& child) {
  ::setpgid(0, 0);
  if (child.death_signal != 0) {
    ::prctl(PR_SET_PDEATHSIG, child.death_signal);
    if (::getppid() != child.parent) {
      ::_exit(k_exec_failed_exit);  // the parent died before the death signal was armed
    }
  }
  // Ignored signals and the signal mask survive exec; a child must start with the defaults.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    ::sigaction(signal, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Every descriptor moves above the targets first, so placing one never clobbers another.
  const int targets = static_cast<int>(child.fds.size()) - 1;
  for (int& fd : child.fds) {
    fd = ::fcntl(fd, F_DUPFD_CLOEXEC, targets);
  }
  const int status_fd = child.fds.back();
  if (child.sandbox_ruleset >= 0) {
    child.sandbox_ruleset = ::fcntl(child.sandbox_ruleset, F_DUPFD_CLOEXEC, targets);  // out of dup2's way
  }
  for (int target = 0; target < targets; ++target) {
    if (child.fds[static_cast<size_t>(target)] < 0 || ::dup2(child.fds[static_cast<size_t>(target)], target) < 0) {
      report_exec_error(status_fd);
    }
  }
  ::close_range(static_cast<unsigned>(targets), ~0U, CLOSE_RANGE_CLOEXEC);  // inherited strays stay out
  if (child.workdir != nullptr && ::chdir(child.workdir) != 0) {
    report_exec_error(status_fd);
  }
  if (child.cpus != nullptr && ::sched_setaffinity(0, sizeof(*child.cpus), child.cpus) != 0) {
    report_exec_error(status_fd);
  }
  // Last, so that the steps above are not restricted; what runs from exec on is.
  if (child.sandbox_ruleset >= 0) {
    if (const int error = sandbox::Ruleset::enforce(child.sandbox_ruleset); error != 0) {
      errno = error;
      report_exec_error(status_fd);
    }
  }
  ::execvpe(child.argv[0], child.argv, child.envp);
  report_exec_error(status_fd);
}

}  // namespace

tl::expected<ChildProcess, SpawnError> ChildProcess::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) {
    return tl::unexpected(SpawnError{"exec", ENOENT});
  }
  int status[2];
  if (::pipe2(status, O_CLOEXEC) != 0) {
    return tl::unexpected(SpawnError{"pipe", errno});
  }
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = options.environment;
  const std::vector<char*> c_args = c_strings(args);
  const std::vector<char*> c_env = c_strings(env);
  const std::string workdir = options.working_directory.string();
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (const int cpu : options.cpus) {
    CPU_SET(cpu, &cpus);
  }
  Prepared child{c_args.data(),
                 c_env.data(),
                 options.fds,
                 workdir.empty() ? nullptr : workdir.c_str(),
                 options.cpus.empty() ? nullptr : &cpus,
                 options.death_signal,
                 ::getpid(),
                 options.sandbox_ruleset_fd};
  child.fds.push_back(status[1]);

  // Signals stay blocked until the child has reset its handlers: a SIGTERM arriving in between
  // would otherwise run the parent's handler inside the child.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid == 0) {
    run_child(child);
  }
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(status[1]);
  if (pid < 0) {
    ::close(status[0]);
    return tl::unexpected(SpawnError{"fork", fork_error});
  }
  ::setpgid(pid, pid);  // also here, so the group exists before the first kill(-pid)
  ChildProcess process;
  process.m_pid = pid;
  process.m_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  int exec_error = 0;
  ssize_t n = 0;
  while ((n = ::read(status[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
  }
  ::close(status[0]);
  if (n > 0) {
    process.kill_group_and_reap();
    return tl::unexpected(SpawnError{"exec", exec_error});
  }
  return process;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_pidfd(std::exchange(other.m_pidfd, -1)),
      m_status(std::exchange(other.m_status, std::nullopt)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (running()) {
      kill_group_and_reap();
    }
    close_pidfd();
    m_pid = std::exchange(other.m_pid, -1);
    m_pidfd = std::exchange(other.m_pidfd, -1);
    m_status = std::exchange(other.m_status, std::nullopt);
  }
  return *this;
}

void ChildProcess::release() {
  m_pid = -1;
  m_status.reset();
  close_pidfd();
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill_group_and_reap();
  }
  close_pidfd();
}

void ChildProcess::close_pidfd() {
  if (m_pidfd >= 0) {
    ::close(m_pidfd);
    m_pidfd = -1;
  }
}

std::optional<int> ChildProcess::try_wait() {
  if (running()) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      m_status = status;
    }
  }
  return m_status;
}

int ChildProcess::wait() {
  if (running()) {
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(m_pid, &status, 0)) < 0 && errno == EINTR) {
    }
    // Reaped by someone else (cannot happen to a child we own): report it as killed.
    m_status = reaped == m_pid ? status : (SIGKILL & 0x7f);
  }
  return m_status.value_or(0);
}

void ChildProcess::signal_group(int signal) const {
  if (running()) {
    ::kill(-m_pid, signal);
  }
}

void ChildProcess::kill_group_and_reap() {
  if (m_pid <= 0) {
    return;
  }
  ::kill(-m_pid, SIGKILL);
  wait();
}

int exit_code_of_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace expctl::util
