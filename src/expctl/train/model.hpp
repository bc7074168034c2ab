#pragma once
/// The one interface the trainer, DDP and checkpoints see of a network, whatever made it: a
/// built-in `torch::nn::Module` (train/models.hpp) or a TorchScript file (torchscript_model.cpp).
/// Another format (torch.export, once it can train from C++) slots in as a third implementation.
/// Adding a model: docs/howto-add-model.md.

#include <torch/serialize/archive.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {

class Model {
 public:
  virtual ~Model() = default;

  /// Trainable tensors (requires_grad), each once, in registration order: the same order on
  /// every rank, which is what makes DDP's buckets agree.
  virtual std::vector<at::Tensor> parameters() const = 0;
  /// Tensors that are state but not trained (BatchNorm's running statistics), in registration
  /// order; DDP broadcasts them from rank 0 (Python DDP's broadcast_buffers).
  virtual std::vector<at::Tensor> buffers() const = 0;

  /// Inputs [N, ...] -> outputs [N, ...] (logits for classification).
  virtual at::Tensor forward(const at::Tensor& inputs) = 0;
  /// The scalar loss the model computes itself (`train.loss: model`); only models that can.
  virtual at::Tensor forward_loss(const at::Tensor& inputs, const at::Tensor& targets);

  virtual void train(bool on) = 0;
  virtual void to(const at::Device& device) = 0;

  /// Parameters and buffers into / from a checkpoint; loading copies values in place, so every
  /// tensor keeps its identity (DDP's hooks stay on the parameters).
  virtual void save_state(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;

  /// Writes the trained model as a file that PyTorch loads (TorchScript: torch.jit.load), with
  /// `metadata` (JSON text) as an extra file "expctl.json"; false when this kind has no such
  /// format (built-in models: their weights are in the checkpoints).
  virtual bool save_artifact(const std::filesystem::path& path, const std::string& metadata) const = 0;

  /// What the model is, for logs and the fingerprint ("cnn", "torchscript model.pt (12 tensors)").
  virtual std::string describe() const = 0;
};

/// What a built-in model is built for: one sample's shape and its output width.
struct ModelShape {
  std::vector<std::int64_t> sample;
  std::int64_t outputs = 0;  ///< output features per sample: classes, or the width of float targets
};

/// Builds the model `options` name: a freshly initialised built-in one (from the global seed) or
/// the module in `options.file`. Throws TrainError naming the problem and the fix.
std::unique_ptr<Model> create_model(const ModelOptions& options, const ModelShape& shape);

/// The TorchScript module in `file`, checked to be trainable: not traced with dropout or
/// BatchNorm (their mode is baked in), not frozen (no parameters left), loadable by this
/// LibTorch (a file from a newer PyTorch names both versions). Throws TrainError otherwise.
std::unique_ptr<Model> load_torchscript(const std::filesystem::path& file);

/// Sets the TorchScript interpreter's process-wide switches to `policy` (before a module runs).
void apply_jit_policy(const JitPolicy& policy);
/// The switches as the interpreter has them now (what apply_jit_policy set, or LibTorch's defaults).
JitPolicy current_jit_policy();

}  // namespace expctl::train
