#pragma once
/// The trainer's data seam (`Dataset`) and the sets held in memory, their images as normalised
/// float32 (or as bytes decoded per batch):
/// Fashion-MNIST and MNIST (IDX files, gzip-compressed or not), CIFAR-10 (its binary batches) and
/// a seeded synthetic set. A missing, truncated or corrupt file is a TrainError whose message
/// starts with the file's path.

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {


/// A labelled set the trainer draws batches from by sample index: the one seam between the trainer
/// and where samples come from (docs/howto-add-model.md, "A new kind of data"). The trainer asks
/// for the size once, before it builds its sampler, then only for samples by index: it never sees
/// how they are stored, so a set that must read to know its size (a folder to list, an index to
/// scan) or that decodes on loader threads implements the same five questions as the in-memory
/// sets below.
class Dataset {
 public:
  Dataset() = default;
  Dataset(const Dataset&) = default;
  Dataset(Dataset&&) = default;
  Dataset& operator=(const Dataset&) = default;
  Dataset& operator=(Dataset&&) = default;
  virtual ~Dataset() = default;

  /// The number of samples. An implementation may learn it only by reading (listing a folder): the
  /// first call may do that work; every call answers the same.
  virtual std::int64_t size() const = 0;
  /// The shape of one sample ([C, H, W], or [features]).
  virtual std::vector<std::int64_t> sample_shape() const = 0;
  /// The outputs a model needs: classes (the largest index + 1, or the set's class count), or the
  /// values per sample of float targets.
  virtual std::int64_t num_classes() const = 0;
  /// True for int64 class targets, false for float32 values (regression).
  virtual bool class_targets() const = 0;
  /// The largest class index among the targets (class targets only).
  virtual std::int64_t largest_class() const = 0;
  /// The inputs of the samples `index` (int64, on device()), in that order: float32, or int64
  /// for integer ids (token ids, categories: never scaled).
  virtual at::Tensor inputs(const at::Tensor& index) const = 0;
  /// Their targets: int64 classes [n] or float32 values [n, ...].
  virtual at::Tensor targets(const at::Tensor& index) const = 0;
  /// Where the samples are (batches are made there).
  virtual at::Device device() const = 0;
  /// Moves the set to `device`.
  virtual void move_to(const at::Device& device) = 0;
  /// The trainer's next samples of `epoch` in the order it will ask for them (the rest of the
  /// epoch's shard): a set that decodes ahead may start on them, and a set that augments draws
  /// the epoch's random numbers. The in-memory sets have nothing to do.
  virtual void upcoming(std::int64_t /*epoch*/, const std::vector<std::int64_t>& /*indices*/) {}
  /// Files passed over so far because they do not decode (data.on_bad_image skip).
  virtual std::vector<std::string> skipped() const { return {}; }
};

/// A set held in memory (or mapped), its images as normalised float32 or as bytes decoded per batch.
struct TensorDataset final : Dataset {
  TensorDataset() = default;
  TensorDataset(at::Tensor images_, at::Tensor labels_, std::int64_t classes_, at::Tensor pixels_ = {},
                at::Tensor lookup_ = {})
      : images(std::move(images_)),
        labels(std::move(labels_)),
        classes(classes_),
        pixels(std::move(pixels_)),
        lookup(std::move(lookup_)) {}

  at::Tensor images;  ///< [N, C, H, W] float32 ([N, features] for a 1-d synthetic shape), or a
                      ///< mapped array (float16/64, or int64/int32 ids, int16 for uint16 ids:
                      ///< converted per batch by rows()); undefined when `pixels` holds the set
  at::Tensor labels;  ///< [N] int64 in [0, classes), or float32 regression targets [N, ...]
  std::int64_t classes = 0;
  /// IDX sets (Fashion-MNIST, MNIST) keep their bytes: [N, C, H, W] uint8, mapped from the decode
  /// cache (the ranks of a host share one copy), with `lookup`, the float32 of each of the 256
  /// byte values (x / 255, then normalised). A batch is decoded when it is drawn: bit for bit the
  /// floats that decoding the whole set gives, without 188 MB of floats and 0.2 s per rank
  /// before the first step.
  at::Tensor pixels = {};
  at::Tensor lookup = {};

  std::int64_t size() const override { return labels.size(0); }
  std::vector<std::int64_t> sample_shape() const override;
  std::int64_t num_classes() const override { return classes; }
  bool class_targets() const override { return labels.scalar_type() == at::kLong; }
  std::int64_t largest_class() const override;
  at::Tensor inputs(const at::Tensor& index) const override { return rows(index); }
  at::Tensor targets(const at::Tensor& index) const override { return labels.index_select(0, index); }
  at::Device device() const override { return labels.device(); }
  void move_to(const at::Device& device) override;

  /// The inputs at `index` (int64, on the data's device), in that order: float32, or int64 ids.
  at::Tensor rows(const at::Tensor& index) const;
  /// Every image as float32 (decodes the whole set: for tests and small sets).
  at::Tensor all_images() const;
  /// This set on `device`.
  TensorDataset to(const at::Device& device) const;
};

/// Loads the dataset described by `options`.
std::unique_ptr<Dataset> load_dataset(const DatasetOptions& options);

/// Loads a pair of IDX files (images: magic 0x803, labels: 0x801), gzip or plain.
TensorDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                 std::int64_t num_classes = 10);

/// Maps a pair of NumPy arrays: inputs [N, ...] of float32, float16, float64 (converted to
/// float32 per batch), uint8 (scaled to [0, 1] per batch) or int64, int32, uint16 ids (int64 per
/// batch, never scaled: token ids); targets [N, ...] of int64/int32/uint16 class indices (a
/// sequence's [N, T] too) or float values. Neither is copied: the ranks of a host share the page cache.
/// `num_classes` is the largest class index + 1, or the values per sample of float targets.
TensorDataset load_npy(const std::filesystem::path& inputs, const std::filesystem::path& targets);

/// A token stream (data.dataset tokens): one flat file of ids, a 1-d `.npy` of int64, int32 or
/// uint16, or a raw uint16 `.bin` (nanoGPT's format), mapped, never copied. Sample k is the window
/// tokens[k*T, k*T + T + 1) for T = `block_size`: its inputs are the first T tokens, its targets the
/// next token of each ([T] int64 both), so the windows tile the stream and the sampler's seeded
/// order over them decides which window a rank trains on at each step. The classes are the ids
/// (the largest + 1). Throws TrainError naming the file when it is no such stream or shorter than
/// one window.
std::unique_ptr<Dataset> load_token_stream(const std::filesystem::path& stream, std::int64_t block_size);

/// Loads CIFAR-10 binary batches (data_batch_1..5.bin or test_batch.bin) from `root` or from
/// `root`/cifar-10-batches-bin.
TensorDataset load_cifar10(const std::filesystem::path& root, bool train);

/// A learnable synthetic set: one random prototype per class (from `seed`) plus noise; each
/// `stream` (0 train, 1 test) draws different samples of the same task.
TensorDataset make_synthetic(std::int64_t size, std::int64_t num_classes, const std::vector<std::int64_t>& shape,
                       std::uint64_t seed, std::uint64_t stream = 0);

/// Applies (x - mean) / std per channel, in place.
void normalize(TensorDataset& dataset, const Normalization& normalization);

/// Rows `indices[begin, begin + count)` of the dataset, as (images, labels).
std::pair<at::Tensor, at::Tensor> gather_batch(const Dataset& dataset, const std::vector<std::int64_t>& indices,
                                               std::size_t begin, std::size_t count);

}  // namespace expctl::train
