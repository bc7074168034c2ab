#pragma once
/// A sampler that yields exactly what PyTorch's `torch.utils.data.DistributedSampler` yields for
/// the same dataset size, world size, rank, seed, epoch, shuffle and drop_last. (LibTorch's own
/// `DistributedRandomSampler` differs: no seed, padding before shuffling, contiguous blocks.)

#include <cstdint>
#include <vector>

namespace expctl::train {

/// DistributedSampler's constructor arguments.
struct DistributedSamplerOptions {
  std::int64_t dataset_size = 0;
  int num_replicas = 1;
  int rank = 0;
  bool shuffle = true;
  std::int64_t seed = 0;
  bool drop_last = false;
};

/// Per-epoch index lists for one rank.
class DistributedSampler {
 public:
  /// Throws TrainError for an empty dataset, a non-positive world or a rank outside it.
  explicit DistributedSampler(DistributedSamplerOptions options);

  /// Selects the epoch whose permutation `indices` returns (Python's `set_epoch`).
  void set_epoch(std::int64_t epoch) { m_epoch = epoch; }
  std::int64_t epoch() const { return m_epoch; }

  /// This rank's indices for the current epoch: randperm(size) from a CPU generator seeded with
  /// seed + epoch (or 0..size-1), padded by repeating from the front (or cut, with drop_last) to
  /// a multiple of the world size, then every num_replicas-th entry starting at rank.
  std::vector<std::int64_t> indices() const;

  /// Indices per rank and epoch (Python's `len(sampler)`).
  std::int64_t num_samples() const { return m_num_samples; }
  /// num_samples * num_replicas.
  std::int64_t total_size() const { return m_num_samples * m_options.num_replicas; }

 private:
  DistributedSamplerOptions m_options;
  std::int64_t m_num_samples;
  std::int64_t m_epoch = 0;
};

}  // namespace expctl::train
