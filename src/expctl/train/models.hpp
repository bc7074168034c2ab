#pragma once
/// The model registry: `mlp` and `cnn` classifiers for [N, C, H, W] images.

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace expctl::train {

/// The spec's `model.name`.
enum class ModelKind { mlp, cnn };

/// Parses "mlp" or "cnn"; throws TrainError otherwise.
ModelKind parse_model_kind(const std::string& text);

/// Architecture knobs (the spec's `model.*`); defaults fit Fashion-MNIST.
struct ModelOptions {
  ModelKind kind = ModelKind::mlp;
  /// One sample's shape: [C, H, W], or [features] for the mlp.
  std::vector<std::int64_t> input_shape = {1, 28, 28};
  std::int64_t num_classes = 10;
  /// mlp: widths of the hidden layers, each followed by ReLU (and dropout).
  std::vector<std::int64_t> hidden = {256, 128};
  /// cnn: output channels of each block "5x5 conv (same padding), ReLU, 2x2 max-pool (, dropout)";
  /// the default two blocks are the Fashion-MNIST benchmark's "2 Conv+pooling" shape.
  std::vector<std::int64_t> channels = {32, 64};
  /// cnn: width of a hidden dense layer before the linear head; 0: the head follows the blocks.
  std::int64_t dense = 0;
  /// Dropout probability after each hidden layer or block; 0: none.
  double dropout = 0.0;
};

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
