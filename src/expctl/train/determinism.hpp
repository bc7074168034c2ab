#pragma once
/// Seeding and deterministic execution: one `seed` seeds everything; streams that must differ
/// per rank are derived from it; `determinism: strict` turns on deterministic algorithms.

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace expctl::train {

/// Seeds LibTorch's default CPU generator and every CUDA device's (torch::manual_seed).
void seed_everything(std::uint64_t seed);

/// A seed for a stream that must differ between ranks (dropout, augmentation): a SplitMix64 mix
/// of (seed, rank), stable across runs and platforms. Rank-independent streams use `seed` itself.
std::uint64_t derived_seed(std::uint64_t seed, std::uint64_t rank);

/// `strict`: deterministic ATen algorithms (errors on ops without one), cuDNN deterministic and
/// not benchmarking, and CUBLAS_WORKSPACE_CONFIG=:4096:8 unless already set (it must be in the
/// environment before the first cuBLAS call). Not strict: LibTorch's defaults.
void set_deterministic(bool strict);

/// The default CPU generator's state (for checkpoints).
at::Tensor cpu_rng_state();
/// Restores a state from `cpu_rng_state`.
void set_cpu_rng_state(const at::Tensor& state);

/// The default generator state of each visible CUDA device, by device index (for checkpoints:
/// dropout on a GPU draws from these, not from the CPU generator). Empty without CUDA.
std::vector<at::Tensor> cuda_rng_states();
/// Restores states from `cuda_rng_states`; states of devices not visible now are ignored.
void set_cuda_rng_states(const std::vector<at::Tensor>& states);

}  // namespace expctl::train
