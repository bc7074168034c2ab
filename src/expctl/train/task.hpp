#pragma once
/// What a step minimises and what evaluation reports (the spec's `train.loss`): the one place
/// where a model's outputs meet the targets.

#include <ATen/ATen.h>

#include <optional>

#include "expctl/train/model.hpp"
#include "expctl/train/options.hpp"

namespace expctl::train {

/// Sums over evaluation batches; `correct` only for classification. The means are sums / count:
/// `count` is the samples, or for classification the targets (a sequence's tokens each count).
struct EvalSums {
  double loss = 0.0;
  std::optional<double> correct;
  std::int64_t count = 0;
};

class Task {
 public:
  explicit Task(LossKind kind) : m_kind(kind) {}

  LossKind kind() const { return m_kind; }
  /// The mean loss of a batch, as backward needs it (run inside the caller's autocast scope).
  at::Tensor loss(Model& model, const at::Tensor& inputs, const at::Tensor& targets) const;
  /// Adds a batch's summed loss (and correct predictions, for classification) and its count to
  /// `sums`; the mean over the set is sums / count.
  void add_eval(Model& model, const at::Tensor& inputs, const at::Tensor& targets, EvalSums& sums) const;
  /// The dtype targets must have (int64 classes, float32 values; the model's loss takes either).
  std::optional<at::ScalarType> target_dtype() const;

 private:
  LossKind m_kind;
};

}  // namespace expctl::train
