#pragma once
/// The catalog of what a spec can train: datasets, models and losses, each one row with its name,
/// its documentation and (for datasets) the files it reads, the size of a fixed training set and
/// its normalisation. Torch-free, and a module of its own below both `spec` and `train` (neither
/// links the other): the spec's choice lists (`data.dataset`, `model.arch`, `train.loss`), the
/// content digests that join the spec hash and docs/spec.md come from these rows, and so do the
/// trainer's default root, normalisation and training-set size of a dataset. The trainer's enums
/// are tied to the rows by a test (tests/unit/run/test_train_options.cpp). Adding a model or a
/// dataset: docs/howto-add-model.md.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::catalog {

/// Where a dataset's samples come from.
enum class DataSource {
  packaged,   ///< files under `data.root` with fixed names (Debian's dataset-* packages)
  synthetic,  ///< generated from the seed; no files
  arrays,     ///< NumPy `.npy` files named by `data.train_inputs` ... `data.eval_targets`
  folders,    ///< folders of JPEG and PNG files, one sub-folder per class (`data.train_dir`, `data.eval_dir`)
};

struct DatasetInfo {
  std::string_view name;
  DataSource source;
  std::string_view default_root;  ///< packaged sets: where Debian installs them
  /// packaged sets: the files training reads, relative to the root, in reading order; "a|b" names
  /// alternatives, the first that exists is read (as the loader picks them).
  std::span<const std::string_view> files;
  /// Samples in the training split when the set is fixed (the packaged sets); 0 when the data
  /// says (synthetic: `num_samples`; arrays, folders and token streams: counted from the files).
  std::int64_t train_samples = 0;
  /// Per-channel mean and standard deviation of pixels scaled to [0, 1], what `data.normalize`
  /// applies (a set of the user's: 0 and 1, i.e. nothing; image folders: ImageNet's, which the
  /// spec's `data.mean` and `data.std` override).
  std::span<const float> mean;
  std::span<const float> std;
  std::string_view doc;
};

struct ModelInfo {
  std::string_view name;
  std::string_view doc;
};

struct LossInfo {
  std::string_view name;
  std::string_view doc;
};

std::span<const DatasetInfo> datasets();
std::span<const ModelInfo> models();
std::span<const LossInfo> losses();

/// The row named `name`, or nullptr.
const DatasetInfo* find_dataset(std::string_view name);

/// "a|b|c": the names of the rows, as a choice field lists them.
std::string choice_list(std::span<const DatasetInfo> rows);
std::string choice_list(std::span<const ModelInfo> rows);
std::string choice_list(std::span<const LossInfo> rows);

/// One file a packaged dataset reads: its name relative to the root (hashed) and where it is.
struct DatasetFile {
  std::string name;
  std::filesystem::path path;
  bool exists = false;
};

/// The files of `dataset` under `root`, each alternative resolved as the loader resolves it (the
/// first that exists; the first named when none does).
std::vector<DatasetFile> dataset_files(const DatasetInfo& dataset, const std::filesystem::path& root);

}  // namespace expctl::catalog
