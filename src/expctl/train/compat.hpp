#pragma once
/// The one place that knows which LibTorch it is built against. Every other file of the train
/// module includes this header for version differences and never tests TORCH_VERSION_* itself.
///
/// Supported: Debian's LibTorch 1.13.1 (CPU, Gloo) and LibTorch 2.x (CUDA, NCCL). Only MAJOR and
/// MINOR are compared: Debian's 1.13.1 reports TORCH_VERSION_PATCH 0.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include <cstdint>
#include <optional>

#ifdef USE_C10D_NCCL
// CUDA-only header. A LibTorch whose torch_cuda target exports USE_C10D_NCCL is a CUDA build;
// Debian's CPU package installs c10/cuda/*.h as well, but not the CUDA runtime headers they
// include, so __has_include cannot tell the two apart.
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#define EXPCTL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if EXPCTL_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace expctl::train::compat {

/// LibTorch's optional, as its APIs take it (TCPStoreOptions::numWorkers, load_from's device):
/// c10::optional is its own class in 1.13 and the early 2.x releases (where std::optional does not
/// convert to it) and an alias of std::optional in later ones; naming c10's is right for all.
template <typename T>
using Optional = c10::optional<T>;

/// The object that runs collectives: `c10d::ProcessGroup` in 1.13; from 2.0 ProcessGroupGloo and
/// ProcessGroupNCCL derive from `c10d::Backend` and ProcessGroup is only a dispatching front.
#if EXPCTL_TORCH_AT_LEAST(2, 0)
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

/// NCCL is compiled in only when LibTorch's torch_cuda target exports USE_C10D_NCCL.
#ifdef USE_C10D_NCCL
inline constexpr bool k_have_nccl = true;
#else
inline constexpr bool k_have_nccl = false;
#endif

/// ATen's `_amp_foreach_non_finite_check_and_unscale_` / `_amp_update_scale_` have CPU kernels
/// from 2.3 on (pytorch#109281); before that they exist for CUDA only.
inline constexpr bool k_cpu_amp_kernels = EXPCTL_TORCH_AT_LEAST(2, 3);

/// CPU autocast accepts only bfloat16 before 2.x ("AutocastCPU only support Bfloat16").
inline constexpr bool k_cpu_autocast_fp16 = EXPCTL_TORCH_AT_LEAST(2, 0);

/// Store options for our rendezvous. 2.x adds `useLibUV` (default true, the maintained server);
/// it is left at its default there, and 1.13 has no such field.
inline c10d::TCPStoreOptions tcp_store_options(bool is_server, std::uint16_t port, int world_size,
                                               std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = port;
  options.isServer = is_server;
  options.numWorkers = world_size;
  options.waitWorkers = true;
  options.timeout = timeout;
  return options;
}

// Autocast: 1.13 has per-device function names (set_cpu_enabled, set_autocast_cpu_dtype, and
// set_enabled/set_autocast_gpu_dtype for CUDA); 2.4 made them device-generic and deprecated the
// old names (pytorch#124359).

/// Whether autocast is enabled for `device` (kCPU or kCUDA) on this thread.
inline bool autocast_enabled(c10::DeviceType device) {
#if EXPCTL_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

/// Enables or disables autocast for `device` on this thread.
inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if EXPCTL_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}

/// The lower-precision dtype autocast casts to on `device`.
inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if EXPCTL_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
#endif
}

/// Sets the autocast dtype for `device` (1.13 CPU throws unless it is bfloat16).
inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
#if EXPCTL_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

// CUDA memory statistics (the caching allocator's, what torch.cuda.max_memory_allocated reads).

/// Whether cuda_memory() can report anything: CUDA builds, recognised by NCCL (a CUDA LibTorch
/// built without NCCL reports -1 everywhere, like a CPU build).
inline constexpr bool k_have_cuda_memory_stats = k_have_nccl;

/// Bytes of the CUDA caching allocator on one device: allocated to tensors and reserved from the
/// driver, now and at their peaks since the last reset_cuda_peak_memory(); -1 where unknown.
/// cuda_memory and reset_cuda_peak_memory need a CUDA device (torch::cuda::is_available()).
struct CudaMemory {
  std::int64_t allocated = -1;
  std::int64_t peak_allocated = -1;
  std::int64_t reserved = -1;
  std::int64_t peak_reserved = -1;
};

#ifdef USE_C10D_NCCL
/// The allocator's per-device state exists only after CUDA's lazy initialisation (the function that
/// forces it was renamed within 2.x: lazyInitCUDA, later lazyInitDevice); allocating a
/// tensor initialises it in every version.
inline void initialise_cuda_allocator(int device) {
  (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(c10::kCUDA, static_cast<c10::DeviceIndex>(device)));
}
#endif

inline CudaMemory cuda_memory([[maybe_unused]] int device) {
  CudaMemory memory;
#ifdef USE_C10D_NCCL
  initialise_cuda_allocator(device);
  // getDeviceStats takes an int in 1.13 and early 2.x, a c10::DeviceIndex later; index 0 of each
  // stat array is StatType::AGGREGATE in every version (where the enum is declared has changed).
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  memory.allocated = stats.allocated_bytes[0].current;
  memory.peak_allocated = stats.allocated_bytes[0].peak;
  memory.reserved = stats.reserved_bytes[0].current;
  memory.peak_reserved = stats.reserved_bytes[0].peak;
#endif
  return memory;
}

/// Starts a new peak-memory window on `device` (no-op without CUDA memory statistics).
inline void reset_cuda_peak_memory([[maybe_unused]] int device) {
#ifdef USE_C10D_NCCL
  initialise_cuda_allocator(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
#endif
}

}  // namespace expctl::train::compat
