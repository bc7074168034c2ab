#pragma once
/// Internal to the sweep_run module: one point's `expctl run` (or `resume`) as a child process
/// (util::ChildProcess). It leads its own process group (so a terminal's Ctrl-C reaches only the
/// sweep, which forwards it once), runs with its slot's CPU affinity, gets SIGTERM when the sweep
/// dies (so a killed sweep leaves interrupted runs, never orphans), reads /dev/null and writes its
/// output to files.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "expctl/util/spawn.hpp"

namespace expctl::sweep_run::detail {

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
  // Destroying one that still runs SIGKILLs its process group and reaps it.

  pid_t pid() const { return m_process.pid(); }
  /// Readable once the process has ended (-1 on kernels without pidfds).
  int pidfd() const { return m_process.pidfd(); }
  /// The exit code once it has ended (128 + signal when a signal killed it); nullopt while it runs.
  std::optional<int> poll();
  /// Sends `signal` to its process group (nothing once it has been reaped).
  void signal(int signal) const;

 private:
  util::ChildProcess m_process;
};

}  // namespace expctl::sweep_run::detail
