#pragma once
/// Datasets held in memory, their images as normalised float32 (or as bytes decoded per batch):
/// Fashion-MNIST and MNIST (IDX files, gzip-compressed or not), CIFAR-10 (its binary batches) and
/// a seeded synthetic set. A missing, truncated or corrupt file is a TrainError whose message
/// starts with the file's path.

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {


/// A labelled image set.
struct Dataset {
  at::Tensor images;  ///< [N, C, H, W] float32 ([N, features] for a 1-d synthetic shape); undefined
                      ///< when `pixels` holds the set
  at::Tensor labels;  ///< [N] int64 in [0, num_classes), or float32 regression targets [N, ...]
  std::int64_t num_classes = 0;
  /// IDX sets (Fashion-MNIST, MNIST) keep their bytes: [N, C, H, W] uint8, mapped from the decode
  /// cache (the ranks of a host share one copy), with `lookup`, the float32 of each of the 256
  /// byte values (x / 255, then normalised). A batch is decoded when it is drawn: bit for bit the
  /// floats that decoding the whole set gives, without 188 MB of floats and 0.2 s per rank
  /// before the first step.
  at::Tensor pixels = {};
  at::Tensor lookup = {};

  std::int64_t size() const { return labels.size(0); }
  /// The shape of one sample ([C, H, W], or [features]).
  std::vector<std::int64_t> sample_shape() const;
  /// The float32 images at `index` (int64, on the data's device), in that order.
  at::Tensor rows(const at::Tensor& index) const;
  /// Every image as float32 (decodes the whole set: for tests and small sets).
  at::Tensor all_images() const;
  /// This set on `device`.
  Dataset to(const at::Device& device) const;
};

/// Loads the dataset described by `options`.
Dataset load_dataset(const DatasetOptions& options);

/// Loads a pair of IDX files (images: magic 0x803, labels: 0x801), gzip or plain.
Dataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                 std::int64_t num_classes = 10);

/// Maps a pair of NumPy arrays: inputs [N, ...] of float32, float16, float64 (converted to
/// float32 per batch) or uint8 (scaled to [0, 1] per batch), targets [N] of int64/int32 class
/// indices or [N, ...] float values. Neither is copied: the ranks of a host share the page cache.
/// `num_classes` is the largest class index + 1, or the values per sample of float targets.
Dataset load_npy(const std::filesystem::path& inputs, const std::filesystem::path& targets);

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
