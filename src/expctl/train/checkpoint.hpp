#pragma once
/// Checkpoints: everything a rank needs to continue bit-for-bit — model parameters and buffers,
/// optimizer state, GradScaler state, the CPU RNG state and the position in training — in one
/// torch archive, written atomically.

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "expctl/train/amp.hpp"
#include "expctl/train/model.hpp"

namespace expctl::train {

/// Where training stands: optimizer steps done (the next step's index) and its epoch.
struct TrainingPosition {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
};

/// Writes a checkpoint to `path` atomically (temporary file + rename); returns its SHA-256 (hex).
/// Throws TrainError naming the path when it cannot be written.
std::string save_checkpoint(const std::filesystem::path& path, const Model& model,
                            const torch::optim::Optimizer& optimizer, const GradScaler& scaler,
                            const TrainingPosition& position);

/// Restores what `save_checkpoint` wrote into existing `model`, `optimizer` and `scaler` (same
/// architecture), sets the CPU RNG state and returns the position. Throws TrainError naming the
/// path when it is missing or not such a checkpoint.
TrainingPosition load_checkpoint(const std::filesystem::path& path, Model& model,
                                 torch::optim::Optimizer& optimizer, GradScaler& scaler);

}  // namespace expctl::train
