#pragma once
/// What the multi-rank train tests share: a rank's Gloo group, parameter snapshots and the
/// tensor files ranks leave for the parent test.

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <vector>

#include "expctl/train/process_group.hpp"
#include "rank_launcher.hpp"

namespace expctl::test {

/// The Gloo group of a rank started by run_ranks (its rendezvous file, a 30 s collective timeout).
inline train::ProcessGroupOptions gloo_group(const RankEnv& env) {
  train::ProcessGroupOptions options;
  options.placement.rank = env.rank;
  options.placement.world_size = env.world_size;
  options.placement.master_port = static_cast<std::uint16_t>(env.master_port);
  options.placement.rendezvous_file = env.rendezvous_file().string();
  options.backend = train::BackendRequest::gloo;
  options.timeout = std::chrono::seconds(30);
  return options;
}

/// Copies of every parameter of `model`.
inline std::vector<torch::Tensor> snapshot(const torch::nn::Module& model) {
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters()) {
    params.push_back(p.detach().clone());
  }
  return params;
}

/// The tensors a rank saved with torch::save.
inline std::vector<torch::Tensor> load_tensors(const std::filesystem::path& path) {
  std::vector<torch::Tensor> tensors;
  torch::load(tensors, path.string());
  return tensors;
}

/// Same values, bit for bit, tensor by tensor.
inline void require_bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(torch::equal(a[i], b[i]));
  }
}

}  // namespace expctl::test
