#pragma once
/// The training loop of one rank: joins the process group, loads data, builds the model, and runs
/// optimizer steps (k micro-batches with no_sync on the first k-1, autocast, GradScaler,
/// clipping, schedule), evaluation and checkpoints, reporting through a MetricSink. The spec is
/// mapped onto `TrainerConfig` by the caller, so this module does not depend on spec parsing.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/datasets.hpp"
#include "expctl/train/ddp.hpp"
#include "expctl/train/metric_sink.hpp"
#include "expctl/train/models.hpp"
#include "expctl/train/optim.hpp"
#include "expctl/train/process_group.hpp"
#include "expctl/train/records.hpp"

namespace expctl::train {

/// How training ended on this rank.
struct TrainResult {
  std::int64_t steps = 0;  ///< optimizer steps done in total (including resumed ones)
  bool interrupted = false;
  double final_train_loss = 0.0;
  std::optional<EvalMetrics> final_eval;
  std::vector<float> losses;  ///< this rank's per-step losses of this invocation
};

/// Optimizer steps per epoch for `config` on a world of `world_size` (micro-batches per rank's
/// shard, divided by grad_accum_steps, rounded down). Throws TrainError if it is 0.
std::int64_t steps_per_epoch(const TrainerConfig& config, std::int64_t dataset_size, int world_size);

/// What a rank would find wrong before its first step, found without a process group or any
/// other rank: the model file loads and is trainable (train::load_torchscript), the data loads,
/// the model takes a batch of it and its outputs fit the targets and the loss, and one backward
/// runs. Throws TrainError with the model's own words. `expctl validate` and `expctl run` call it
/// (through the plugin) for specs with a model file or arrays, so these errors come before
/// anything is recorded.
void check_training(const TrainerConfig& config);

/// Runs training. `stop` (may be null) requests a graceful stop: all ranks agree on it after
/// the current step, write a checkpoint and return with `interrupted` set.
TrainResult run_training(const TrainerConfig& config, MetricSink& sink, const std::atomic<bool>* stop = nullptr);

}  // namespace expctl::train
