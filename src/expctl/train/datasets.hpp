#pragma once
/// Datasets held in memory as normalised float32 tensors: Fashion-MNIST and MNIST (IDX files,
/// gzip-compressed or not), CIFAR-10 (its binary batches) and a seeded synthetic set. A missing,
/// truncated or corrupt file is a TrainError whose message starts with the file's path.

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {


/// A labelled image set.
struct Dataset {
  at::Tensor images;  ///< [N, C, H, W] float32 ([N, features] for a 1-d synthetic shape)
  at::Tensor labels;  ///< [N] int64 in [0, num_classes)
  std::int64_t num_classes = 0;
  std::int64_t size() const { return labels.size(0); }
};

/// Loads the dataset described by `options`.
Dataset load_dataset(const DatasetOptions& options);

/// Loads a pair of IDX files (images: magic 0x803, labels: 0x801), gzip or plain.
Dataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                 std::int64_t num_classes = 10);

/// Loads CIFAR-10 binary batches (data_batch_1..5.bin or test_batch.bin) from `root` or from
/// `root`/cifar-10-batches-bin.
Dataset load_cifar10(const std::filesystem::path& root, bool train);

/// A learnable synthetic set: one random prototype per class (from `seed`) plus noise; each
/// `stream` (0 train, 1 test) draws different samples of the same task.
Dataset make_synthetic(std::int64_t size, std::int64_t num_classes, const std::vector<std::int64_t>& shape,
                       std::uint64_t seed, std::uint64_t stream = 0);

/// Applies (x - mean) / std per channel, in place.
void normalize(Dataset& dataset, const Normalization& normalization);

/// Rows `indices[begin, begin + count)` of the dataset, as (images, labels).
std::pair<at::Tensor, at::Tensor> gather_batch(const Dataset& dataset, const std::vector<std::int64_t>& indices,
                                               std::size_t begin, std::size_t count);

}  // namespace expctl::train
