#pragma once
/// NVIDIA's management library (NVML), loaded with dlopen where the driver installed it: no CUDA
/// header or library at build time, nothing at all on a machine without an NVIDIA driver. The
/// GPU probe of the fingerprint (env/gpu_probe.cpp) and the supervisor's per-rank GPU sampling
/// (launch/gpu_usage.hpp) both read it through this one class.
///
/// Which library: `libnvidia-ml.so.1` (the driver's soname), or the file EXPCTL_NVML_LIBRARY
/// names (the tests load a stand-in with it: tests/support/fake_nvml.c).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace expctl::util {

class Nvml {
 public:
  /// Loads and initialises NVML; none when there is no library or nvmlInit fails (no driver, no
  /// device): never an error.
  static std::optional<Nvml> open();
  ~Nvml();
  Nvml(Nvml&&) noexcept;
  Nvml& operator=(Nvml&&) noexcept;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  unsigned int device_count() const;
  /// Per device index: its name, UUID and total memory in bytes; "unknown"/0 where NVML says nothing.
  std::string name(unsigned int device) const;
  std::string uuid(unsigned int device) const;
  std::uint64_t memory_total(unsigned int device) const;
  /// The share of the last sample period a kernel ran on the device, in percent.
  std::optional<unsigned int> utilization(unsigned int device) const;
  /// The processes using the device for compute and the device memory each holds, in bytes.
  struct Process {
    pid_t pid = 0;
    std::uint64_t used_bytes = 0;
  };
  std::vector<Process> compute_processes(unsigned int device) const;
  std::optional<std::string> driver_version() const;
  std::optional<int> cuda_driver_version() const;  ///< e.g. 12040

 private:
  struct Impl;
  explicit Nvml(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace expctl::util
