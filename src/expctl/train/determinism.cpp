#include "expctl/train/determinism.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
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

// Through the device-generic Context::defaultGenerator, so this compiles without CUDA headers;
// device_count() is 0 for a CPU LibTorch, which never reaches the CUDA hooks.
std::vector<at::Tensor> cuda_rng_states() {
  std::vector<at::Tensor> states;
  const auto devices = static_cast<c10::DeviceIndex>(torch::cuda::device_count());
  for (c10::DeviceIndex index = 0; index < devices; ++index) {
    auto generator = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, index));
    std::lock_guard<std::mutex> lock(generator.mutex());
    states.push_back(generator.get_state());
  }
  return states;
}

void set_cuda_rng_states(const std::vector<at::Tensor>& states) {
  const auto devices = static_cast<std::size_t>(torch::cuda::device_count());
  for (std::size_t index = 0; index < states.size() && index < devices; ++index) {
    auto generator =
        at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)));
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(states[index]);
  }
}

}  // namespace expctl::train
