#include "expctl/train/models.hpp"

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <unordered_set>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

class MlpImpl : public ClassifierImpl {
 public:
  explicit MlpImpl(const ModelOptions& options) {
    std::int64_t width = options.input_shape[0] * options.input_shape[1] * options.input_shape[2];
    for (const auto hidden : options.hidden) {
      EXPCTL_CHECK(hidden > 0, TrainError, "mlp hidden widths must be positive, got {}", hidden);
      m_layers->push_back(torch::nn::Linear(width, hidden));
      m_layers->push_back(torch::nn::ReLU());
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
    EXPCTL_CHECK(options.channels.size() == 2 && options.channels[0] > 0 && options.channels[1] > 0, TrainError,
                 "cnn needs two positive channel counts, got {}", options.channels.size());
    const auto height = options.input_shape[1];
    const auto width = options.input_shape[2];
    EXPCTL_CHECK(height % 4 == 0 && width % 4 == 0, TrainError,
                 "cnn input {}x{} must be divisible by 4 (two 2x2 poolings)", height, width);
    // "same" padding keeps H and W; each pooling halves them.
    const auto conv = [](std::int64_t in, std::int64_t out) {
      return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 5).padding(2));
    };
    m_layers->push_back(conv(options.input_shape[0], options.channels[0]));
    m_layers->push_back(torch::nn::ReLU());
    m_layers->push_back(torch::nn::MaxPool2d(2));
    m_layers->push_back(conv(options.channels[0], options.channels[1]));
    m_layers->push_back(torch::nn::ReLU());
    m_layers->push_back(torch::nn::MaxPool2d(2));
    m_layers->push_back(torch::nn::Flatten());
    m_layers->push_back(torch::nn::Linear(options.channels[1] * (height / 4) * (width / 4), options.dense));
    m_layers->push_back(torch::nn::ReLU());
    m_layers->push_back(torch::nn::Linear(options.dense, options.num_classes));
    register_module("layers", m_layers);
  }
  at::Tensor forward(at::Tensor images) override { return m_layers->forward(images); }

 private:
  torch::nn::Sequential m_layers;
};

}  // namespace

ModelKind parse_model_kind(const std::string& text) {
  if (text == "mlp") {
    return ModelKind::mlp;
  }
  EXPCTL_CHECK(text == "cnn", TrainError, "unknown model \"{}\": use mlp or cnn", text);
  return ModelKind::cnn;
}

std::shared_ptr<ClassifierImpl> make_model(const ModelOptions& options) {
  EXPCTL_CHECK(options.input_shape.size() == 3 && options.input_shape[0] > 0 && options.input_shape[1] > 0 &&
                   options.input_shape[2] > 0,
               TrainError, "model input shape must be [C, H, W] with positive sizes");
  EXPCTL_CHECK(options.num_classes > 1, TrainError, "a classifier needs at least 2 classes, got {}",
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
