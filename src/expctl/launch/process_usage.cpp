#include "expctl/launch/process_usage.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <dirent.h>

#include "expctl/util/nvml.hpp"

namespace expctl::launch {

namespace {

// utime and stime (fields 14 and 15 of /proc/PID/stat, in clock ticks), read after the ")" that
// ends the command name (which may hold spaces and parentheses).
std::optional<double> cpu_seconds_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) {
    return std::nullopt;
  }
  const auto end_of_name = text.rfind(')');
  if (end_of_name == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(text.substr(end_of_name + 2));  // from field 3, the state
  std::string field;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14) {
      utime = std::stoull(field);
    } else if (index == 15) {
      stime = std::stoull(field);
    }
  }
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
}

std::optional<std::int64_t> rss_bytes_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  std::int64_t size = 0;
  std::int64_t resident = 0;
  // A process that has exited but is not reaped yet (a zombie) has no memory left: statm reads all
  // zeros. It reads as gone, not as a rank using 0 MB (a run's last sys_rss_mb read 0.0 so).
  if (!(in >> size >> resident) || size == 0) {
    return std::nullopt;
  }
  static const long page = ::sysconf(_SC_PAGESIZE);
  return resident * (page > 0 ? page : 4096);
}

// The children of every thread of `pid` (a child belongs to the thread that forked it).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) {
    return children;
  }
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') {
      continue;
    }
    std::ifstream in(tasks + "/" + entry->d_name + "/children");
    for (pid_t child = 0; in >> child;) {
      children.push_back(child);
    }
  }
  ::closedir(dir);
  return children;
}

}  // namespace

std::optional<ProcessUsage> read_process_tree(pid_t pid) {
  ProcessUsage usage;
  std::vector<pid_t> pending{pid};
  std::set<pid_t> seen;
  while (!pending.empty()) {
    const pid_t next = pending.back();
    pending.pop_back();
    if (!seen.insert(next).second || seen.size() > 4096) {
      continue;
    }
    const auto cpu = cpu_seconds_of(next);
    const auto rss = rss_bytes_of(next);
    if (!cpu || !rss) {
      if (next == pid) {
        return std::nullopt;
      }
      continue;  // a child that ended between the listing and the read
    }
    usage.cpu_seconds += *cpu;
    usage.rss_bytes += *rss;
    ++usage.processes;
    usage.pids.push_back(next);
    for (const pid_t child : children_of(next)) {
      pending.push_back(child);
    }
  }
  return usage;
}

std::optional<GpuReading::TreeShare> GpuReading::of_tree(std::span<const pid_t> pids) const {
  std::set<unsigned int> devices;
  double bytes = 0.0;
  for (const pid_t pid : pids) {
    if (const auto found = by_pid.find(pid); found != by_pid.end()) {
      for (const Use& use : found->second) {
        devices.insert(use.device);
        bytes += static_cast<double>(use.bytes);
      }
    }
  }
  if (devices.empty()) {
    return std::nullopt;
  }
  double percent = 0.0;
  for (const unsigned int device : devices) {
    percent += device < utilization.size() ? utilization[device].value_or(0) : 0;
  }
  return TreeShare{.percent = percent / static_cast<double>(devices.size()), .mem_mb = bytes / (1024.0 * 1024.0)};
}

struct GpuUsage::State {
  bool tried = false;
  std::optional<util::Nvml> nvml;
};

GpuUsage::GpuUsage() : m_state(std::make_unique<State>()) {}
GpuUsage::~GpuUsage() = default;

std::optional<GpuReading> GpuUsage::read() {
  if (!m_state->tried) {
    m_state->tried = true;
    m_state->nvml = util::Nvml::open();
  }
  if (!m_state->nvml) {
    return std::nullopt;
  }
  GpuReading reading;
  const util::Nvml& nvml = *m_state->nvml;
  for (unsigned int device = 0; device < nvml.device_count(); ++device) {
    reading.utilization.push_back(nvml.utilization(device));
    for (const util::Nvml::Process& process : nvml.compute_processes(device)) {
      reading.by_pid[process.pid].push_back({device, process.used_bytes});
    }
  }
  return reading;
}

std::optional<UsageRate::Sample> UsageRate::read(int rank, pid_t pid, Clock::time_point now, const GpuReading* gpu) {
  const auto usage = read_process_tree(pid);
  if (!usage) {
    m_last.erase(rank);
    return std::nullopt;
  }
  const auto last = m_last.find(rank);
  std::optional<Sample> sample;
  if (last != m_last.end()) {
    const double wall = std::chrono::duration<double>(now - last->second.at).count();
    if (wall > 0.0) {
      const double used = usage->cpu_seconds - last->second.cpu_seconds;
      sample = Sample{.cpu_percent = used > 0.0 ? 100.0 * used / wall : 0.0,
                      .rss_mb = static_cast<double>(usage->rss_bytes) / (1024.0 * 1024.0)};
      if (const auto share = gpu != nullptr ? gpu->of_tree(usage->pids) : std::nullopt) {
        sample->gpu_percent = share->percent;
        sample->gpu_mem_mb = share->mem_mb;
      }
    }
  }
  m_last[rank] = Last{.cpu_seconds = usage->cpu_seconds, .at = now};
  return sample;
}

}  // namespace expctl::launch
