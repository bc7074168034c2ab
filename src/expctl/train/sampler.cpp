#include "expctl/train/sampler.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

DistributedSampler::DistributedSampler(DistributedSamplerOptions options) : m_options(options) {
  EXPCTL_CHECK(options.dataset_size > 0, TrainError, "cannot sample from an empty dataset");
  EXPCTL_CHECK(options.num_replicas > 0 && options.rank >= 0 && options.rank < options.num_replicas, TrainError,
               "sampler rank {} is outside a world of size {}", options.rank, options.num_replicas);
  const std::int64_t world = options.num_replicas;
  // Python: with drop_last, the tail that cannot be split evenly is dropped.
  m_num_samples = options.drop_last && options.dataset_size % world != 0
                      ? ceil_div(options.dataset_size - world, world)
                      : ceil_div(options.dataset_size, world);
  EXPCTL_CHECK(m_num_samples > 0, TrainError,
               "drop_last leaves no samples: {} samples cannot give each of {} ranks one", options.dataset_size,
               options.num_replicas);
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  const std::int64_t size = m_options.dataset_size;
  std::vector<std::int64_t> all;
  if (m_options.shuffle) {
    // torch.Generator().manual_seed(seed + epoch); torch.randperm(n, generator=g)
    auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(m_options.seed + m_epoch));
    const auto permutation = at::randperm(size, generator, at::TensorOptions().dtype(at::kLong));
    const auto* data = permutation.data_ptr<std::int64_t>();
    all.assign(data, data + size);
  } else {
    all.resize(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) {
      all[static_cast<std::size_t>(i)] = i;
    }
  }
  const auto total = static_cast<std::size_t>(total_size());
  // Padding repeats the list from its start as often as needed (Python's indices[:padding]
  // or (indices * ceil(padding / len))[:padding]); drop_last cuts instead.
  for (std::size_t i = all.size(); i < total; ++i) {
    all.push_back(all[i % static_cast<std::size_t>(size)]);
  }
  all.resize(total);
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(m_num_samples));
  for (std::size_t i = static_cast<std::size_t>(m_options.rank); i < total;
       i += static_cast<std::size_t>(m_options.num_replicas)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace expctl::train
