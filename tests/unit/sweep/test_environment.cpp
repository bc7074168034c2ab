// Which environment hashes count as this machine for skip-if-done.

#include <catch2/catch.hpp>

#include "expctl/env/fingerprint.hpp"
#include "expctl/sweep/environment.hpp"
#include "sweep_test_helpers.hpp"

using namespace expctl;

namespace {

nlohmann::json fingerprint_with(const nlohmann::json& vars, int gpus) {
  env::Fingerprint fingerprint;
  fingerprint.set("env.vars", vars);
  fingerprint.set("gpu.count", gpus);
  return fingerprint.to_json();
}

}  // namespace

TEST_CASE("environment: without GPU slots only the fingerprint's own hash counts") {
  const auto fingerprint = fingerprint_with({{"OMP_PROC_BIND", "true"}}, 0);
  const std::vector<sweep::Slot> slots{{0, {0}, {}}, {1, {1}, {}}};
  const auto hashes = sweep::accepted_environments(fingerprint, slots);
  CHECK(hashes == std::set<std::string>{env::Fingerprint::from_json(fingerprint, "test").hash()});
  CHECK(sweep::gpu_count(fingerprint) == 0);
}

TEST_CASE("environment: each GPU slot's CUDA_VISIBLE_DEVICES variant counts as this machine too") {
  const auto fingerprint = fingerprint_with(nlohmann::json::object(), 2);
  const std::vector<sweep::Slot> slots{{0, {0}, {"0"}}, {1, {1}, {"1"}}};
  const auto hashes = sweep::accepted_environments(fingerprint, slots);
  CHECK(hashes.size() == 3);
  const auto slot_one = fingerprint_with({{"CUDA_VISIBLE_DEVICES", "1"}}, 2);
  CHECK(hashes.count(env::Fingerprint::from_json(slot_one, "test").hash()) == 1);
  CHECK(sweep::gpu_count(fingerprint) == 2);
}

TEST_CASE("environment: fingerprints are collected once per folder, determinism and profile") {
  const sweep::Sweep sweep = sweep::load_sweep(test::sweep_test::data("grid.yaml"));
  int calls = 0;
  sweep::Fingerprints fingerprints([&](const spec::Spec&) {
    ++calls;
    return fingerprint_with(nlohmann::json::object(), 0);
  });
  for (const auto& point : sweep.points) {
    fingerprints.of(point.spec);
  }
  CHECK(calls == 1);
}
