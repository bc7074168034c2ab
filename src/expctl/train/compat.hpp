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

#include <optional>

#define EXPCTL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if EXPCTL_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace expctl::train::compat {

/// LibTorch's optional: c10::optional in 1.13 (a distinct type), std::optional from 2.x on.
#if EXPCTL_TORCH_AT_LEAST(2, 0)
template <typename T>
using Optional = std::optional<T>;
#else
template <typename T>
using Optional = c10::optional<T>;
#endif

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

}  // namespace expctl::train::compat
