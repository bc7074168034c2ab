// Seeding, derived per-rank seeds, strict determinism and RNG state round trips.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "expctl/train/determinism.hpp"

using namespace expctl::train;

TEST_CASE("determinism: one seed reproduces the same random numbers", "[train][determinism]") {
  seed_everything(123);
  const auto a = torch::randn({8});
  seed_everything(123);
  CHECK(torch::equal(torch::randn({8}), a));
  seed_everything(124);
  CHECK_FALSE(torch::equal(torch::randn({8}), a));
}

TEST_CASE("determinism: derived seeds are stable and differ per rank", "[train][determinism]") {
  CHECK(derived_seed(42, 0) == derived_seed(42, 0));
  CHECK(derived_seed(42, 0) != derived_seed(42, 1));
  CHECK(derived_seed(42, 1) != derived_seed(43, 1));
  CHECK(derived_seed(0, 0) == 0xE220A8397B1DCDAFULL);  // SplitMix64's first output for state 0
}

TEST_CASE("determinism: strict mode switches deterministic algorithms on and off", "[train][determinism]") {
  set_deterministic(true);
  CHECK(at::globalContext().deterministicAlgorithms());
  CHECK(at::globalContext().deterministicCuDNN());
  CHECK(std::getenv("CUBLAS_WORKSPACE_CONFIG") != nullptr);
  set_deterministic(false);
  CHECK_FALSE(at::globalContext().deterministicAlgorithms());
}

TEST_CASE("determinism: the CPU generator state survives a save and restore", "[train][determinism]") {
  seed_everything(7);
  torch::randn({3});
  const auto state = cpu_rng_state();
  const auto expected = torch::randn({5});
  torch::randn({100});
  set_cpu_rng_state(state);
  CHECK(torch::equal(torch::randn({5}), expected));
}
