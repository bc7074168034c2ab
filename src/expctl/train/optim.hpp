#pragma once
/// Optimizers (SGD with momentum/Nesterov, AdamW), learning-rate schedules with linear warm-up,
/// and gradient clipping by global norm.

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "expctl/train/options.hpp"

namespace expctl::train {


/// LibTorch's SGD or AdamW over `params`; throws TrainError for invalid hyper-parameters.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<at::Tensor> params,
                                                        const OptimizerOptions& options);


/// Learning rate at optimizer step `step` (0-based) for base rate `base_lr`.
double learning_rate_at(const ScheduleOptions& schedule, double base_lr, std::int64_t step);

/// Sets every parameter group's learning rate.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

/// Scales gradients so their global L2 norm is at most `max_norm`; returns the norm before
/// clipping (inf/NaN if a gradient is not finite). Call after GradScaler::unscale.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace expctl::train
