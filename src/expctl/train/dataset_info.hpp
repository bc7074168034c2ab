#pragma once
/// A dataset kind's row of the catalog (catalog/catalog.hpp): its default root, the size of a
/// fixed training set and its normalisation, which the trainer takes from there and nowhere else
/// (default_dataset_root, default_normalization, training_set_size). Torch-free.

#include "expctl/catalog/catalog.hpp"
#include "expctl/train/options.hpp"

namespace expctl::train {

/// The catalog row named dataset_name(kind); every kind has one (a test ties the two).
const catalog::DatasetInfo& dataset_info(DatasetKind kind);

}  // namespace expctl::train
