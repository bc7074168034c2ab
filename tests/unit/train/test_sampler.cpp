// The sampler against indices recorded from python3-torch's own DistributedSampler
// (tools/make_sampler_fixture.py -> tests/data/train/sampler_fixture.json).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "expctl/train/sampler.hpp"
#include "expctl/util/error.hpp"

namespace {

using expctl::train::DistributedSampler;
using expctl::train::DistributedSamplerOptions;

nlohmann::json load_fixture() {
  std::ifstream in(std::string(EXPCTL_TRAIN_TEST_DATA) + "/sampler_fixture.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::int64_t weighted_sum(const std::vector<std::int64_t>& indices) {
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    sum += static_cast<std::int64_t>(i + 1) * indices[i];
  }
  return sum;
}

}  // namespace

TEST_CASE("sampler: identical to PyTorch's DistributedSampler for every fixture case", "[train][sampler]") {
  const auto fixture = load_fixture();
  REQUIRE(fixture.at("cases").size() >= 50);
  for (const auto& c : fixture.at("cases")) {
    INFO(c.dump().substr(0, 160));
    DistributedSamplerOptions options;
    options.dataset_size = c.at("size").get<std::int64_t>();
    options.num_replicas = c.at("world").get<int>();
    options.rank = c.at("rank").get<int>();
    options.seed = c.at("seed").get<std::int64_t>();
    options.shuffle = c.at("shuffle").get<bool>();
    options.drop_last = c.at("drop_last").get<bool>();
    DistributedSampler sampler(options);
    sampler.set_epoch(c.at("epoch").get<std::int64_t>());
    const auto indices = sampler.indices();
    REQUIRE(static_cast<std::int64_t>(indices.size()) == c.at("length").get<std::int64_t>());
    CHECK(sampler.num_samples() == c.at("length").get<std::int64_t>());
    if (c.contains("indices")) {
      CHECK(indices == c.at("indices").get<std::vector<std::int64_t>>());
    } else {
      const auto head = c.at("head").get<std::vector<std::int64_t>>();
      const auto tail = c.at("tail").get<std::vector<std::int64_t>>();
      CHECK(std::vector<std::int64_t>(indices.begin(), indices.begin() + 50) == head);
      CHECK(std::vector<std::int64_t>(indices.end() - 50, indices.end()) == tail);
      CHECK(weighted_sum(indices) == c.at("weighted_sum").get<std::int64_t>());
    }
  }
}

TEST_CASE("sampler: invalid worlds and empty datasets are errors", "[train][sampler]") {
  DistributedSamplerOptions options;
  options.dataset_size = 10;
  options.num_replicas = 2;
  options.rank = 2;
  CHECK_THROWS_WITH(DistributedSampler(options), "sampler rank 2 is outside a world of size 2");
  options.rank = 0;
  options.dataset_size = 0;
  CHECK_THROWS_WITH(DistributedSampler(options), "cannot sample from an empty dataset");
  options.dataset_size = 3;
  options.num_replicas = 4;
  options.drop_last = true;
  CHECK_THROWS_AS(DistributedSampler(options), expctl::util::TrainError);
}
