#pragma once
/// Optimizers (SGD with momentum/Nesterov, AdamW), learning-rate schedules with linear warm-up,
/// and gradient clipping by global norm.

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace expctl::train {

/// The spec's `optim.name`.
enum class OptimizerKind { sgd, adamw };
/// Parses "sgd" or "adamw"; throws TrainError otherwise.
OptimizerKind parse_optimizer_kind(const std::string& text);

/// Optimizer hyper-parameters (unused ones are ignored by the other kind).
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::sgd;
  double lr = 0.01;
  double weight_decay = 0.0;
  double momentum = 0.0;  ///< sgd
  bool nesterov = false;  ///< sgd; needs momentum > 0
  double beta1 = 0.9;     ///< adamw
  double beta2 = 0.999;   ///< adamw
  double eps = 1e-8;      ///< adamw
};

/// LibTorch's SGD or AdamW over `params`; throws TrainError for invalid hyper-parameters.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<at::Tensor> params,
                                                        const OptimizerOptions& options);

/// The spec's `optim.schedule`.
enum class ScheduleKind { constant, step, cosine };
/// Parses "constant", "step" or "cosine"; throws TrainError otherwise.
ScheduleKind parse_schedule_kind(const std::string& text);

/// A schedule over optimizer steps 0..total_steps-1.
struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::constant;
  std::int64_t warmup_steps = 0;  ///< lr rises linearly: base * (step + 1) / warmup_steps
  std::int64_t total_steps = 1;   ///< cosine decays to min_lr at this step
  std::int64_t step_size = 1;     ///< step: multiply by gamma every step_size steps after warm-up
  double gamma = 0.1;
  double min_lr = 0.0;            ///< cosine floor
};

/// Learning rate at optimizer step `step` (0-based) for base rate `base_lr`.
double learning_rate_at(const ScheduleOptions& schedule, double base_lr, std::int64_t step);

/// Sets every parameter group's learning rate.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// Scales gradients so their global L2 norm is at most `max_norm`; returns the norm before
/// clipping (inf/NaN if a gradient is not finite). Call after GradScaler::unscale.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace expctl::train
