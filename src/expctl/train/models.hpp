#pragma once
/// The model registry: `mlp` and `cnn` classifiers for [N, C, H, W] images.

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {


/// A classifier: images in, unnormalised class scores (logits) out.
class ClassifierImpl : public torch::nn::Module {
 public:
  /// [N, C, H, W] float -> [N, num_classes] logits.
  virtual at::Tensor forward(at::Tensor images) = 0;
};

/// Builds a freshly initialised model (PyTorch's default initialisation, from the global seed).
/// Throws TrainError for shapes the architecture cannot take.
std::shared_ptr<ClassifierImpl> make_model(const ModelOptions& options);

/// Number of scalar parameters (tied ones once).
std::int64_t parameter_count(const torch::nn::Module& model);

}  // namespace expctl::train
