#include "expctl/sweep/slots.hpp"

#include <sched.h>

#include <fmt/format.h>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep {

namespace {

// Items [begin, end) of the slot `index` of `slots` over `count` items: sizes differ by one at most.
template <typename T>
std::vector<T> share(std::span<const T> items, size_t index, size_t slots) {
  const size_t begin = index * items.size() / slots;
  const size_t end = (index + 1) * items.size() / slots;
  return {items.begin() + static_cast<std::ptrdiff_t>(begin), items.begin() + static_cast<std::ptrdiff_t>(end)};
}

}  // namespace

std::vector<Slot> plan_slots(size_t parallel, std::span<const int> cpus, std::span<const std::string> gpus) {
  EXPCTL_CHECK(parallel >= 1, util::UsageError, "--parallel must be at least 1 (got {})", parallel);
  EXPCTL_CHECK(parallel <= cpus.size(), util::UsageError,
               "--parallel {} needs {} cores, but this process may run on {} ({}): slots would share cores; use "
               "--parallel {} at most",
               parallel, parallel, cpus.size(), cpu_list_text(cpus), cpus.size());
  const bool split_gpus = parallel > 1 && !gpus.empty();
  EXPCTL_CHECK(!split_gpus || parallel <= gpus.size(), util::UsageError,
               "--parallel {} needs a GPU per slot, but {} are visible ({}): use --parallel {} at most", parallel,
               gpus.size(), util::join(std::vector<std::string>(gpus.begin(), gpus.end()), ","), gpus.size());
  std::vector<Slot> slots;
  for (size_t index = 0; index < parallel; ++index) {
    slots.push_back({index, share(cpus, index, parallel), split_gpus ? share(gpus, index, parallel) : std::vector<std::string>{}});
  }
  return slots;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return {0};
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) {
      cpus.push_back(cpu);
    }
  }
  return cpus;
}

std::vector<std::string> visible_gpus(const std::optional<std::string>& cuda_visible_devices, int gpu_count) {
  std::vector<std::string> gpus;
  if (cuda_visible_devices) {
    for (const std::string& entry : util::split(*cuda_visible_devices, ',')) {
      if (const auto trimmed = util::trim(entry); !trimmed.empty()) {
        gpus.emplace_back(trimmed);
      }
    }
    return gpus;
  }
  for (int gpu = 0; gpu < gpu_count; ++gpu) {
    gpus.push_back(std::to_string(gpu));
  }
  return gpus;
}

std::string cpu_list_text(std::span<const int> cpus) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    ranges.push_back(i == j ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return util::join(ranges, ",");
}

}  // namespace expctl::sweep
