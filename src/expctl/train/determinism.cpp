#include "expctl/train/determinism.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include <cstdlib>
#include <mutex>

namespace expctl::train {

void seed_everything(std::uint64_t seed) {
  torch::manual_seed(seed);
}

std::uint64_t derived_seed(std::uint64_t seed, std::uint64_t rank) {
  // SplitMix64 (Steele et al.): consecutive inputs give statistically independent outputs.
  std::uint64_t z = seed + (rank + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31U);
}

void set_deterministic(bool strict) {
  if (strict) {
    // Must precede cuBLAS handle creation; an explicit user setting wins.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  }
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(strict, /*warn_only=*/false);
  context.setDeterministicCuDNN(strict);
  context.setBenchmarkCuDNN(false);
}

at::Tensor cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace expctl::train
