#pragma once
/// Datasets held in memory as normalised float32 tensors: Fashion-MNIST and MNIST (IDX files,
/// gzip-compressed or not), CIFAR-10 (its binary batches) and a seeded synthetic set. A missing,
/// truncated or corrupt file is a TrainError whose message starts with the file's path.

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace expctl::train {

/// The spec's `data.dataset`.
enum class DatasetKind { fashion_mnist, mnist, cifar10, synthetic };

/// Parses "fashion-mnist", "mnist", "cifar10" or "synthetic"; throws TrainError otherwise.
DatasetKind parse_dataset_kind(const std::string& text);
/// The spec spelling of `kind`.
const char* dataset_name(DatasetKind kind);

/// Per-channel mean and standard deviation of pixels scaled to [0, 1].
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;
};

/// The usual constants (e.g. Fashion-MNIST 0.2860/0.3530); synthetic data is left as is (0/1).
Normalization default_normalization(DatasetKind kind);

/// Where a dataset is looked for when the spec gives no root (Debian's dataset-fashion-mnist
/// installs /usr/share/datasets/fashion-mnist).
std::filesystem::path default_dataset_root(DatasetKind kind);

/// What to load.
struct DatasetOptions {
  DatasetKind kind = DatasetKind::fashion_mnist;
  std::filesystem::path root;  ///< empty: default_dataset_root(kind)
  bool train = true;           ///< training split, else the test split
  bool normalize = true;
  // Synthetic data only:
  std::int64_t synthetic_size = 1024;
  std::int64_t synthetic_classes = 10;
  std::vector<std::int64_t> synthetic_shape = {1, 28, 28};
  std::uint64_t seed = 0;
};

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
