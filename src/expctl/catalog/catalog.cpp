#include "expctl/catalog/catalog.hpp"

#include "expctl/util/strings.hpp"

namespace expctl::catalog {

namespace fs = std::filesystem;

namespace {

// Debian ships the IDX files gzip-compressed; an uncompressed copy is read when no .gz exists.
constexpr std::string_view k_fashion_mnist_files[] = {
    "train-images-idx3-ubyte.gz|train-images-idx3-ubyte",
    "train-labels-idx1-ubyte.gz|train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte.gz|t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte.gz|t10k-labels-idx1-ubyte",
};
// CIFAR-10's binary version, in its own folder as the archive unpacks or directly in the root.
constexpr std::string_view k_cifar10_files[] = {
    "cifar-10-batches-bin/data_batch_1.bin|data_batch_1.bin", "cifar-10-batches-bin/data_batch_2.bin|data_batch_2.bin",
    "cifar-10-batches-bin/data_batch_3.bin|data_batch_3.bin", "cifar-10-batches-bin/data_batch_4.bin|data_batch_4.bin",
    "cifar-10-batches-bin/data_batch_5.bin|data_batch_5.bin", "cifar-10-batches-bin/test_batch.bin|test_batch.bin",
};

// Normalisations: each set's own pixel statistics; ImageNet's for image folders, as torchvision's
// model zoo and most recipes use them; nothing (0 and 1) for data the user brings in its own scale.
constexpr float k_fashion_mnist_mean[] = {0.2860F};
constexpr float k_fashion_mnist_std[] = {0.3530F};
constexpr float k_mnist_mean[] = {0.1307F};
constexpr float k_mnist_std[] = {0.3081F};
constexpr float k_cifar10_mean[] = {0.4914F, 0.4822F, 0.4465F};
constexpr float k_cifar10_std[] = {0.2470F, 0.2435F, 0.2616F};
constexpr float k_imagenet_mean[] = {0.485F, 0.456F, 0.406F};
constexpr float k_imagenet_std[] = {0.229F, 0.224F, 0.225F};
constexpr float k_none_mean[] = {0.0F};
constexpr float k_none_std[] = {1.0F};

// One row per dataset, laid out by hand: clang-format would put each argument on a line of its own.
// clang-format off
constexpr DatasetInfo k_datasets[] = {
    {"fashion-mnist", DataSource::packaged, "/usr/share/datasets/fashion-mnist", k_fashion_mnist_files,
     60000, k_fashion_mnist_mean, k_fashion_mnist_std,
     "Fashion-MNIST (Debian's `dataset-fashion-mnist`): 60000 + 10000 grey 28x28 images, 10 classes."},
    {"mnist", DataSource::packaged, "/usr/share/datasets/mnist", k_fashion_mnist_files,
     60000, k_mnist_mean, k_mnist_std,
     "MNIST digits in the same IDX files as Fashion-MNIST."},
    {"cifar10", DataSource::packaged, "/usr/share/datasets/cifar10", k_cifar10_files,
     50000, k_cifar10_mean, k_cifar10_std,
     "CIFAR-10's binary batches: 50000 + 10000 colour 32x32 images, 10 classes."},
    {"synthetic", DataSource::synthetic, "", {}, 0, k_none_mean, k_none_std,
     "A learnable set generated from `seed` (`num_samples`, `num_classes`, `input_shape`); no files."},
    {"npy", DataSource::arrays, "", {}, 0, k_none_mean, k_none_std,
     "Your own arrays: NumPy `.npy` files named by `train_inputs`, `train_targets`, `eval_inputs`, `eval_targets` "
     "(docs/models.md)."},
    {"imagefolder", DataSource::folders, "", {}, 0, k_imagenet_mean, k_imagenet_std,
     "Your own images: folders of JPEG and PNG files with one sub-folder per class (`train_dir`, `eval_dir`), "
     "decoded and augmented by loader threads (docs/data.md)."},
    {"tokens", DataSource::arrays, "", {}, 0, k_none_mean, k_none_std,
     "Your own token stream: one flat file of token ids per split (`train_inputs`, `eval_inputs`: a 1-d `.npy` of "
     "int64, int32 or uint16, or a raw uint16 `.bin`) cut into windows of `block_size` (docs/models.md)."},
};
// clang-format on

constexpr ModelInfo k_models[] = {
    {"mlp", "fully connected layers (`hidden_sizes`) with ReLU"},
    {"cnn", "5x5 convolution blocks (`channels`), an optional dense layer (`dense`) and a linear head"},
    {"torchscript", "your own network: a `torch.jit.script` module saved to `model.file` (docs/models.md)"},
};

constexpr LossInfo k_losses[] = {
    {"cross_entropy", "classification: cross-entropy of the logits against integer class targets; accuracy reported"},
    {"mse", "regression: mean squared error against float targets of the output's shape; eval loss reported"},
    {"model", "the model computes its own loss: `forward(inputs, targets)` returns a scalar (torchscript only)"},
};

template <typename Row>
std::string join_names(std::span<const Row> rows) {
  std::vector<std::string> names;
  for (const Row& row : rows) {
    names.emplace_back(row.name);
  }
  return util::join(names, "|");
}

}  // namespace

std::span<const DatasetInfo> datasets() {
  return k_datasets;
}
std::span<const ModelInfo> models() {
  return k_models;
}
std::span<const LossInfo> losses() {
  return k_losses;
}

const DatasetInfo* find_dataset(std::string_view name) {
  for (const DatasetInfo& row : k_datasets) {
    if (row.name == name) {
      return &row;
    }
  }
  return nullptr;
}

std::string choice_list(std::span<const DatasetInfo> rows) {
  return join_names(rows);
}
std::string choice_list(std::span<const ModelInfo> rows) {
  return join_names(rows);
}
std::string choice_list(std::span<const LossInfo> rows) {
  return join_names(rows);
}

std::vector<DatasetFile> dataset_files(const DatasetInfo& dataset, const fs::path& root) {
  std::vector<DatasetFile> files;
  for (const std::string_view entry : dataset.files) {
    const auto alternatives = util::split(std::string(entry), '|');
    DatasetFile chosen{alternatives.front(), root / alternatives.front(), false};
    for (const std::string& name : alternatives) {
      std::error_code error;
      if (fs::is_regular_file(root / name, error)) {
        chosen = {name, root / name, true};
        break;
      }
    }
    files.push_back(std::move(chosen));
  }
  return files;
}

}  // namespace expctl::catalog
