#pragma once
/// What a rank costs the machine, read from /proc: the CPU time and resident memory of the rank's
/// process and every process under it (a DataLoader's workers, a program's own subprocesses), so
/// that `sys_cpu_percent` and `sys_rss_mb` say what the whole rank uses. Linux only; a process
/// that is gone reads as none.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include <sys/types.h>

namespace expctl::launch {

/// One reading of a process tree.
struct ProcessUsage {
  double cpu_seconds = 0.0;    ///< user + system time of the live processes, since each started
  std::int64_t rss_bytes = 0;  ///< resident memory, summed (shared pages count in each process)
  int processes = 0;           ///< how many processes were read
};

/// The tree under `pid` (the process, then its children through /proc/PID/task/TID/children,
/// recursively); none when `pid` itself cannot be read.
std::optional<ProcessUsage> read_process_tree(pid_t pid);

/// CPU use as a rate: the CPU seconds a tree used between two readings over the wall time between
/// them, in percent of one core (200 = two cores busy). A reading where a child ended in between
/// can go down: it is then 0, never negative.
class UsageRate {
 public:
  using Clock = std::chrono::steady_clock;
  /// The rank's CPU percent since the previous reading of it, and its memory in MiB; none for its
  /// first reading (no interval yet) or a process that is gone.
  struct Sample {
    double cpu_percent = 0.0;
    double rss_mb = 0.0;
  };
  std::optional<Sample> read(int rank, pid_t pid, Clock::time_point now);

 private:
  struct Last {
    double cpu_seconds = 0.0;
    Clock::time_point at{};
  };
  std::map<int, Last> m_last;
};

}  // namespace expctl::launch
