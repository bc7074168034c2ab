#include "expctl/util/nvml.hpp"

#include <array>
#include <cstdlib>

#include <dlfcn.h>

namespace expctl::util {

namespace {

// The NVML entry points we call, declared here so that no CUDA header is needed. Their ABI has
// been stable since NVML 5 (the _v2 names exist since driver 325).
using Device = struct NvmlDeviceOpaque*;
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
// nvmlProcessInfo_v1_t (nvmlDeviceGetComputeRunningProcesses) and the _v2/_v3 layout (MIG ids after).
struct ProcessV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};
struct ProcessV2 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr int k_success = 0;
constexpr int k_insufficient_size = 7;                 // NVML_ERROR_INSUFFICIENT_SIZE
constexpr unsigned long long k_not_available = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE (no per-process accounting)
constexpr unsigned int k_string_size = 96;             // NVML_DEVICE_NAME_V2_BUFFER_SIZE, the largest we read

template <typename Function>
Function symbol(void* library, const char* name) {
  return reinterpret_cast<Function>(::dlsym(library, name));
}

}  // namespace

struct Nvml::Impl {
  void* library = nullptr;
  int (*shutdown)() = nullptr;
  int (*get_count)(unsigned int*) = nullptr;
  int (*get_handle)(unsigned int, Device*) = nullptr;
  int (*get_name)(Device, char*, unsigned int) = nullptr;
  int (*get_uuid)(Device, char*, unsigned int) = nullptr;
  int (*get_memory)(Device, Memory*) = nullptr;
  int (*get_utilization)(Device, Utilization*) = nullptr;
  int (*get_processes_v2)(Device, unsigned int*, ProcessV2*) = nullptr;  // _v3, else _v2
  int (*get_processes_v1)(Device, unsigned int*, ProcessV1*) = nullptr;
  int (*get_driver)(char*, unsigned int) = nullptr;
  int (*get_cuda_driver)(int*) = nullptr;

  ~Impl() {
    if (shutdown != nullptr) {
      shutdown();
    }
    if (library != nullptr) {
      ::dlclose(library);
    }
  }

  std::optional<Device> device(unsigned int index) const {
    Device handle = nullptr;
    if (get_handle == nullptr || get_handle(index, &handle) != k_success) {
      return std::nullopt;
    }
    return handle;
  }

  std::string device_string(int (*getter)(Device, char*, unsigned int), unsigned int index) const {
    std::array<char, k_string_size> buffer{};
    const auto handle = device(index);
    if (getter == nullptr || !handle || getter(*handle, buffer.data(), k_string_size) != k_success) {
      return "unknown";
    }
    return buffer.data();
  }

  // NVML's two-call protocol: ask with room for `room`; on "insufficient size" it says how many.
  template <typename Info>
  std::vector<Nvml::Process> processes(int (*getter)(Device, unsigned int*, Info*), Device handle) const {
    std::vector<Info> infos(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto count = static_cast<unsigned int>(infos.size());
      const int status = getter(handle, &count, infos.data());
      if (status == k_insufficient_size) {
        infos.resize(count + 8);  // processes may start between the calls
        continue;
      }
      std::vector<Nvml::Process> list;
      if (status == k_success) {
        for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
          const auto used = infos[i].used_gpu_memory;
          list.push_back({static_cast<pid_t>(infos[i].pid), used == k_not_available ? 0 : used});
        }
      }
      return list;
    }
    return {};
  }
};

std::optional<Nvml> Nvml::open() {
  const char* override_path = std::getenv("EXPCTL_NVML_LIBRARY");
  const char* path = override_path != nullptr && *override_path != '\0' ? override_path : "libnvidia-ml.so.1";
  auto impl = std::make_unique<Impl>();
  impl->library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (impl->library == nullptr) {
    return std::nullopt;
  }
  const auto init = symbol<int (*)()>(impl->library, "nvmlInit_v2");
  if (init == nullptr || init() != k_success) {
    return std::nullopt;
  }
  void* library = impl->library;
  impl->shutdown = symbol<int (*)()>(library, "nvmlShutdown");
  impl->get_count = symbol<int (*)(unsigned int*)>(library, "nvmlDeviceGetCount_v2");
  impl->get_handle = symbol<int (*)(unsigned int, Device*)>(library, "nvmlDeviceGetHandleByIndex_v2");
  impl->get_name = symbol<int (*)(Device, char*, unsigned int)>(library, "nvmlDeviceGetName");
  impl->get_uuid = symbol<int (*)(Device, char*, unsigned int)>(library, "nvmlDeviceGetUUID");
  impl->get_memory = symbol<int (*)(Device, Memory*)>(library, "nvmlDeviceGetMemoryInfo");
  impl->get_utilization = symbol<int (*)(Device, Utilization*)>(library, "nvmlDeviceGetUtilizationRates");
  impl->get_processes_v2 =
      symbol<int (*)(Device, unsigned int*, ProcessV2*)>(library, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (impl->get_processes_v2 == nullptr) {
    impl->get_processes_v2 =
        symbol<int (*)(Device, unsigned int*, ProcessV2*)>(library, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  impl->get_processes_v1 =
      symbol<int (*)(Device, unsigned int*, ProcessV1*)>(library, "nvmlDeviceGetComputeRunningProcesses");
  impl->get_driver = symbol<int (*)(char*, unsigned int)>(library, "nvmlSystemGetDriverVersion");
  impl->get_cuda_driver = symbol<int (*)(int*)>(library, "nvmlSystemGetCudaDriverVersion_v2");
  return Nvml(std::move(impl));
}

Nvml::Nvml(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Nvml::~Nvml() = default;
Nvml::Nvml(Nvml&&) noexcept = default;
Nvml& Nvml::operator=(Nvml&&) noexcept = default;

unsigned int Nvml::device_count() const {
  unsigned int count = 0;
  return m_impl->get_count != nullptr && m_impl->get_count(&count) == k_success ? count : 0;
}

std::string Nvml::name(unsigned int device) const {
  return m_impl->device_string(m_impl->get_name, device);
}

std::string Nvml::uuid(unsigned int device) const {
  return m_impl->device_string(m_impl->get_uuid, device);
}

std::uint64_t Nvml::memory_total(unsigned int device) const {
  Memory memory{};
  const auto handle = m_impl->device(device);
  return m_impl->get_memory != nullptr && handle && m_impl->get_memory(*handle, &memory) == k_success ? memory.total
                                                                                                      : 0;
}

std::optional<unsigned int> Nvml::utilization(unsigned int device) const {
  Utilization rates{};
  const auto handle = m_impl->device(device);
  if (m_impl->get_utilization == nullptr || !handle || m_impl->get_utilization(*handle, &rates) != k_success) {
    return std::nullopt;
  }
  return rates.gpu;
}

std::vector<Nvml::Process> Nvml::compute_processes(unsigned int device) const {
  const auto handle = m_impl->device(device);
  if (!handle) {
    return {};
  }
  if (m_impl->get_processes_v2 != nullptr) {
    return m_impl->processes(m_impl->get_processes_v2, *handle);
  }
  return m_impl->get_processes_v1 != nullptr ? m_impl->processes(m_impl->get_processes_v1, *handle)
                                             : std::vector<Process>{};
}

std::optional<std::string> Nvml::driver_version() const {
  std::array<char, k_string_size> buffer{};
  if (m_impl->get_driver == nullptr || m_impl->get_driver(buffer.data(), k_string_size) != k_success) {
    return std::nullopt;
  }
  return std::string(buffer.data());
}

std::optional<int> Nvml::cuda_driver_version() const {
  int version = 0;
  if (m_impl->get_cuda_driver == nullptr || m_impl->get_cuda_driver(&version) != k_success) {
    return std::nullopt;
  }
  return version;
}

}  // namespace expctl::util
