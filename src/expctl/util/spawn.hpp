#pragma once
/// The one way expctl starts a child process: a rank (launch/rank_process), a sweep's point
/// (sweep_run/child) and a captured command (util/subprocess). The child leads a process group of
/// its own (so one kill reaches whatever it starts), optionally gets a signal when its parent dies,
/// starts with default handlers for the signals expctl catches and an empty signal mask, and
/// holds exactly the descriptors it is given (every other one is closed at exec). The parent gets
/// a pidfd, which poll() reports readable when the child has ended. Linux only.
///
/// It lives in util, not launch, because util's run_capture is one of its callers and env's
/// probes (which link util only) run commands through run_capture.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include <tl/expected.hpp>

namespace expctl::util {

struct SpawnOptions {
  std::vector<std::string> argv{};         ///< argv[0]: a path, or a name looked up in PATH
  std::vector<std::string> environment{};  ///< the child's whole environment, "NAME=value"
  /// The child's descriptors 0, 1, 2, ...: `fds[i]` becomes descriptor i. The caller keeps (and
  /// closes) its own copies.
  std::vector<int> fds{};
  std::filesystem::path working_directory{};  ///< empty: inherited
  std::vector<int> cpus{};                    ///< CPU affinity; empty: inherited
  int death_signal = 0;                       ///< sent to the child when the parent dies (PR_SET_PDEATHSIG); 0: none
  /// A Landlock ruleset (util::sandbox::Ruleset::fd) the child enforces just before exec; -1: none.
  int sandbox_ruleset_fd = -1;
};

/// Why a child did not start: the call that failed ("pipe", "fork", or "exec" for anything the
/// child did before its program ran) and its errno.
struct SpawnError {
  std::string call;
  int error = 0;
};

/// A started child. Destroying one that still runs SIGKILLs its process group and reaps it.
class ChildProcess {
 public:
  static tl::expected<ChildProcess, SpawnError> spawn(const SpawnOptions& options);

  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return m_pid; }
  /// Readable once the child has ended; -1 when the kernel offers no pidfd (before Linux 5.3).
  int pidfd() const { return m_pidfd; }
  /// True from spawn until the child has been reaped.
  bool running() const { return m_pid > 0 && !m_status; }
  /// Its wait status (see waitpid) once it has ended; nullopt while it runs. Never blocks.
  std::optional<int> try_wait();
  /// Waits for it to end and returns its wait status.
  int wait();
  /// Sends `signal` to its process group; nothing once it has been reaped.
  void signal_group(int signal) const;
  /// SIGKILL to its process group, also after it has been reaped (grandchildren it left there),
  /// then reaps it when it still runs.
  void kill_group_and_reap();
  /// Lets the child outlive this object (and the caller): forgets it without a signal. For a child
  /// that ends by itself, e.g. the background `expctl` that ships what a run left behind.
  void release();

 private:
  void close_pidfd();

  pid_t m_pid = -1;
  int m_pidfd = -1;
  std::optional<int> m_status;
};

/// The exit code a shell would report for a wait status: the exit status, or 128 + the signal.
int exit_code_of_status(int status);

}  // namespace expctl::util
