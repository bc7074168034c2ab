#include "expctl/train/optim.hpp"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

constexpr double k_pi = 3.14159265358979323846;

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<at::Tensor> params,
                                                        const OptimizerOptions& options) {
  EXPCTL_CHECK(options.lr > 0.0, TrainError, "learning rate must be positive, got {}", options.lr);
  EXPCTL_CHECK(options.weight_decay >= 0.0, TrainError, "weight_decay must be >= 0, got {}", options.weight_decay);
  if (options.kind == OptimizerKind::adamw) {
    return std::make_unique<torch::optim::AdamW>(
        std::move(params), torch::optim::AdamWOptions(options.lr)
                               .betas({options.beta1, options.beta2})
                               .eps(options.eps)
                               .weight_decay(options.weight_decay));
  }
  EXPCTL_CHECK(!options.nesterov || options.momentum > 0.0, TrainError,
               "nesterov needs momentum > 0 (got momentum {})", options.momentum);
  return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(options.lr)
                                                                    .momentum(options.momentum)
                                                                    .nesterov(options.nesterov)
                                                                    .weight_decay(options.weight_decay));
}

double learning_rate_at(const ScheduleOptions& schedule, double base_lr, std::int64_t step) {
  if (step < schedule.warmup_steps) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(schedule.warmup_steps);
  }
  const auto after = step - schedule.warmup_steps;
  switch (schedule.kind) {
    case ScheduleKind::constant:
      return base_lr;
    case ScheduleKind::step:
      return base_lr * std::pow(schedule.gamma, static_cast<double>(after / std::max<std::int64_t>(1, schedule.step_size)));
    case ScheduleKind::cosine: {
      const auto span = std::max<std::int64_t>(1, schedule.total_steps - schedule.warmup_steps);
      const double progress = std::min(1.0, static_cast<double>(after) / static_cast<double>(span));
      return schedule.min_lr + (base_lr - schedule.min_lr) * 0.5 * (1.0 + std::cos(k_pi * progress));
    }
  }
  return base_lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    group.options().set_lr(lr);
  }
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  EXPCTL_CHECK(max_norm > 0.0, TrainError, "grad clipping max_norm must be positive, got {}", max_norm);
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
}

}  // namespace expctl::train
