#include "expctl/train/models.hpp"

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <unordered_set>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

void add_dropout(torch::nn::Sequential& layers, double dropout) {
  if (dropout > 0.0) {
    layers->push_back(torch::nn::Dropout(dropout));
  }
}

class MlpImpl : public ClassifierImpl {
 public:
  explicit MlpImpl(const ModelOptions& options) {
    std::int64_t width = 1;
    for (const auto size : options.input_shape) {
      width *= size;
    }
    for (const auto hidden : options.hidden) {
      EXPCTL_CHECK(hidden > 0, TrainError, "mlp hidden widths must be positive, got {}", hidden);
      m_layers->push_back(torch::nn::Linear(width, hidden));
      m_layers->push_back(torch::nn::ReLU());
      add_dropout(m_layers, options.dropout);
      width = hidden;
    }
    m_layers->push_back(torch::nn::Linear(width, options.num_classes));
    register_module("layers", m_layers);
  }
  at::Tensor forward(at::Tensor images) override { return m_layers->forward(images.flatten(1)); }

 private:
  torch::nn::Sequential m_layers;
};

class CnnImpl : public ClassifierImpl {
 public:
  explicit CnnImpl(const ModelOptions& options) {
    EXPCTL_CHECK(options.input_shape.size() == 3, TrainError,
                 "cnn needs an input shape [channels, height, width], got {} dimension(s)",
                 options.input_shape.size());
    EXPCTL_CHECK(!options.channels.empty(), TrainError, "cnn needs at least one conv block");
    std::int64_t channels = options.input_shape[0];
    std::int64_t height = options.input_shape[1];
    std::int64_t width = options.input_shape[2];
    for (const auto out : options.channels) {
      EXPCTL_CHECK(out > 0, TrainError, "cnn channel counts must be positive, got {}", out);
      EXPCTL_CHECK(height >= 2 && width >= 2, TrainError,
                   "cnn input {}x{} is too small for {} 2x2 poolings", options.input_shape[1],
                   options.input_shape[2], options.channels.size());
      // "same" padding keeps H and W; each pooling halves them (rounding down).
      m_layers->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, out, 5).padding(2)));
      m_layers->push_back(torch::nn::ReLU());
      m_layers->push_back(torch::nn::MaxPool2d(2));
      add_dropout(m_layers, options.dropout);
      channels = out;
      height /= 2;
      width /= 2;
    }
    m_layers->push_back(torch::nn::Flatten());
    std::int64_t features = channels * height * width;
    if (options.dense > 0) {
      m_layers->push_back(torch::nn::Linear(features, options.dense));
      m_layers->push_back(torch::nn::ReLU());
      add_dropout(m_layers, options.dropout);
      features = options.dense;
    }
    m_layers->push_back(torch::nn::Linear(features, options.num_classes));
    register_module("layers", m_layers);
  }
  at::Tensor forward(at::Tensor images) override { return m_layers->forward(images); }

 private:
  torch::nn::Sequential m_layers;
};

}  // namespace

std::shared_ptr<ClassifierImpl> make_model(const ModelOptions& options) {
  EXPCTL_CHECK(!options.input_shape.empty() && options.input_shape.size() <= 3, TrainError,
               "model input shape must be [features] or [C, H, W], got {} dimension(s)", options.input_shape.size());
  for (const auto size : options.input_shape) {
    EXPCTL_CHECK(size > 0, TrainError, "model input sizes must be positive, got {}", size);
  }
  EXPCTL_CHECK(options.dropout >= 0.0 && options.dropout < 1.0, TrainError, "dropout must be in [0, 1), got {}",
               options.dropout);
  EXPCTL_CHECK(options.num_classes >= 1, TrainError, "a model needs at least 1 output (class or target value), got {}",
               options.num_classes);
  if (options.kind == ModelKind::cnn) {
    return std::make_shared<CnnImpl>(options);
  }
  return std::make_shared<MlpImpl>(options);
}

std::int64_t parameter_count(const torch::nn::Module& model) {
  std::unordered_set<const c10::TensorImpl*> seen;
  std::int64_t count = 0;
  for (const auto& param : model.parameters()) {
    if (seen.insert(param.unsafeGetTensorImpl()).second) {
      count += param.numel();
    }
  }
  return count;
}

}  // namespace expctl::train
