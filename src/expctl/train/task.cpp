#include "expctl/train/task.hpp"

#include <torch/nn/functional/loss.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

namespace F = torch::nn::functional;
using util::TrainError;

// Regression targets of one value per sample come as [N]; a model's outputs as [N, 1].
at::Tensor shaped_like(const at::Tensor& targets, const at::Tensor& outputs) {
  if (targets.sizes() == outputs.sizes()) {
    return targets;
  }
  EXPCTL_CHECK(targets.numel() == outputs.numel(), TrainError,
               "the model's outputs have shape [{}] but the targets [{}]: for train.loss mse they must match "
               "(one target value per output)",
               fmt::join(outputs.sizes(), ", "), fmt::join(targets.sizes(), ", "));
  return targets.reshape(outputs.sizes());
}

// Logits [N, C] for targets [N], or [N, T, ..., C] for targets [N, T, ...] (a sequence's tokens):
// flattened to [N * T * ..., C] against [N * T * ...].
std::pair<at::Tensor, at::Tensor> class_pairs(const at::Tensor& logits, const at::Tensor& targets) {
  const bool fits = logits.dim() == targets.dim() + 1 && logits.dim() >= 2 &&
                    logits.sizes().slice(0, static_cast<std::size_t>(targets.dim())) == targets.sizes();
  EXPCTL_CHECK(fits, TrainError,
               "the model's outputs have shape [{}] for targets of shape [{}]; train.loss cross_entropy needs logits "
               "[batch, classes] for targets [batch], or [batch, T, classes] for targets [batch, T]",
               fmt::join(logits.sizes(), ", "), fmt::join(targets.sizes(), ", "));
  if (logits.dim() == 2) {
    return {logits, targets};
  }
  return {logits.reshape({-1, logits.size(-1)}), targets.reshape({-1})};
}

}  // namespace

at::Tensor Task::loss(Model& model, const at::Tensor& inputs, const at::Tensor& targets) const {
  switch (m_kind) {
    case LossKind::cross_entropy: {
      const auto [logits, classes] = class_pairs(model.forward(inputs), targets);
      return F::cross_entropy(logits, classes);
    }
    case LossKind::mse: {
      const auto outputs = model.forward(inputs);
      return F::mse_loss(outputs, shaped_like(targets, outputs).to(outputs.scalar_type()));
    }
    case LossKind::model:
      return model.forward_loss(inputs, targets);
  }
  EXPCTL_ASSERT(false, "loss kind {} not handled", static_cast<int>(m_kind));
}

void Task::add_eval(Model& model, const at::Tensor& inputs, const at::Tensor& targets, EvalSums& sums) const {
  const auto batch = static_cast<double>(inputs.size(0));
  switch (m_kind) {
    case LossKind::cross_entropy: {
      const auto [logits, classes] = class_pairs(model.forward(inputs).to(at::kFloat), targets);
      sums.loss +=
          F::cross_entropy(logits, classes, F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
      sums.correct = sums.correct.value_or(0.0) + (logits.argmax(1) == classes).sum().item<double>();
      sums.count += classes.size(0);
      return;
    }
    case LossKind::mse: {
      const auto outputs = model.forward(inputs).to(at::kFloat);
      const auto errors = F::mse_loss(outputs, shaped_like(targets, outputs).to(at::kFloat),
                                      F::MSELossFuncOptions().reduction(torch::kNone));
      sums.loss += errors.reshape({inputs.size(0), -1}).mean(1).sum().item<double>();  // per-sample means
      sums.count += inputs.size(0);
      return;
    }
    case LossKind::model:
      sums.loss += model.forward_loss(inputs, targets).to(at::kFloat).item<double>() * batch;
      sums.count += inputs.size(0);
      return;
  }
}

std::optional<at::ScalarType> Task::target_dtype() const {
  switch (m_kind) {
    case LossKind::cross_entropy:
      return at::kLong;
    case LossKind::mse:
      return at::kFloat;
    case LossKind::model:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace expctl::train
