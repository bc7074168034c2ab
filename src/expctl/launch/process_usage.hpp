#pragma once
/// What a rank costs the machine, read from /proc: the CPU time and resident memory of the rank's
/// process and every process under it (a DataLoader's workers, a program's own subprocesses), so
/// that `sys_cpu_percent` and `sys_rss_mb` say what the whole rank uses; and where NVIDIA's
/// driver is installed (NVML, util/nvml.hpp), the device memory those processes hold and the
/// utilization of the GPUs they use (`sys_gpu_percent`, `sys_gpu_mem_mb`). Linux only; a process
/// that is gone reads as none.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <sys/types.h>

namespace expctl::launch {

/// One reading of a process tree.
struct ProcessUsage {
  double cpu_seconds = 0.0;    ///< user + system time of the live processes, since each started
  std::int64_t rss_bytes = 0;  ///< resident memory, summed (shared pages count in each process)
  int processes = 0;           ///< how many processes were read
  std::vector<pid_t> pids;     ///< those processes
};

/// The tree under `pid` (the process, then its children through /proc/PID/task/TID/children,
/// recursively); none when `pid` itself cannot be read.
std::optional<ProcessUsage> read_process_tree(pid_t pid);

/// What the GPUs say of processes at one moment (NVML): the device memory each process holds and
/// each device's utilization. Read once per sampling tick for every rank.
struct GpuReading {
  struct Use {
    unsigned int device = 0;
    std::uint64_t bytes = 0;
  };
  std::map<pid_t, std::vector<Use>> by_pid;
  std::vector<std::optional<unsigned int>> utilization;  ///< per device index, percent

  /// A process tree's share: the device memory its processes hold (MiB, summed over devices) and
  /// the mean utilization of the devices they use; none when none of them uses a GPU.
  struct TreeShare {
    double percent = 0.0;
    double mem_mb = 0.0;
  };
  std::optional<TreeShare> of_tree(std::span<const pid_t> pids) const;
};

/// NVML, loaded at the first read (none on a machine without NVIDIA's driver: then every read
/// is none and costs nothing).
class GpuUsage {
 public:
  GpuUsage();
  ~GpuUsage();
  GpuUsage(const GpuUsage&) = delete;
  GpuUsage& operator=(const GpuUsage&) = delete;
  std::optional<GpuReading> read();

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

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
    std::optional<double> gpu_percent{};  ///< where the rank's processes use a GPU (`gpu`)
    std::optional<double> gpu_mem_mb{};
  };
  std::optional<Sample> read(int rank, pid_t pid, Clock::time_point now, const GpuReading* gpu = nullptr);

 private:
  struct Last {
    double cpu_seconds = 0.0;
    Clock::time_point at{};
  };
  std::map<int, Last> m_last;
};

}  // namespace expctl::launch
