#pragma once
/// Internal to the sweep module: one point's `expctl run` (or `resume`) as a child process. It
/// leads its own process group (so a terminal's Ctrl-C reaches only the sweep, which forwards it
/// once), runs with its slot's CPU affinity, gets SIGTERM when the sweep dies (so a killed sweep
/// leaves interrupted runs, never orphans), reads /dev/null and writes its output to files.

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace expctl::sweep::detail {

struct ChildSpec {
  std::vector<std::string> argv;         ///< argv[0] is an absolute path
  std::vector<std::string> environment;  ///< "NAME=value"
  std::vector<int> cpus;                 ///< CPU affinity; empty: inherited
  std::filesystem::path stdout_path;     ///< truncated
  std::filesystem::path stderr_path;     ///< appended to
};

class Child {
 public:
  /// Starts the process; throws util::Failure (exit 1) naming the program when it cannot be
  /// executed or its output files cannot be opened.
  explicit Child(const ChildSpec& spec);
  /// SIGKILLs the process group and reaps the process if it is still running.
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return m_pid; }
  /// The exit code once it has ended (128 + signal when a signal killed it); nullopt while it runs.
  std::optional<int> poll();
  /// Sends `signal` to its process group (nothing once it has been reaped).
  void signal(int signal) const;

 private:
  pid_t m_pid = -1;
  std::optional<int> m_exit;
};

/// The signal mask a child starts with: every signal unblocked (the sweep blocks the ones it
/// reads through a signalfd, and a blocked mask survives exec).
void unblock_all_signals();

}  // namespace expctl::sweep::detail
