#pragma once
/// Slots: the disjoint sets of CPU cores (and GPUs) that points running at the same time get, so
/// parallel points never share a core. A point's `expctl run` is started with its slot's CPU
/// affinity, which its ranks inherit; the launcher sizes OMP_NUM_THREADS from that affinity
/// (launch::available_cores), so the thread count follows the slot without a variable that would
/// change the environment hash.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace expctl::sweep {

/// Where one of the points that run at the same time runs.
struct Slot {
  size_t index = 0;
  std::vector<int> cpus;          ///< its cores (the CPU affinity of its point's processes)
  std::vector<std::string> gpus;  ///< its CUDA_VISIBLE_DEVICES entries; empty: the variable is left alone
};

/// Splits `cpus` (and `gpus`, when there are any and `parallel` > 1) into `parallel` disjoint
/// slots of near-equal size, in order. One slot keeps every core and leaves CUDA_VISIBLE_DEVICES
/// alone. Throws util::UsageError (exit 2) when there are fewer cores, or GPUs, than slots.
std::vector<Slot> plan_slots(size_t parallel, std::span<const int> cpus, std::span<const std::string> gpus);

/// The CPUs this process may run on (its affinity mask), ascending.
std::vector<int> allowed_cpus();

/// The GPUs slots divide: the entries of CUDA_VISIBLE_DEVICES when it is set (empty when it is
/// set empty), else "0" .. "gpu_count-1".
std::vector<std::string> visible_gpus(const std::optional<std::string>& cuda_visible_devices, int gpu_count);

/// Linux's list format: "0-3,8".
std::string cpu_list_text(std::span<const int> cpus);

}  // namespace expctl::sweep
