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

#include "expctl/train/datasets.hpp"
#include "expctl/train/ddp.hpp"
#include "expctl/train/models.hpp"
#include "expctl/train/optim.hpp"
#include "expctl/train/process_group.hpp"

namespace expctl::train {

/// Everything one rank needs to train.
struct TrainerConfig {
  ProcessGroupOptions group;
  std::uint64_t seed = 0;
  bool strict_determinism = true;
  DatasetOptions data;  ///< `train` is ignored: both splits are loaded
  std::int64_t batch_size = 64;  ///< per rank, per micro-batch
  bool shuffle = true;
  bool drop_last = false;
  ModelOptions model;
  OptimizerOptions optim;
  ScheduleOptions schedule;  ///< total_steps is filled in from epochs / max_steps
  std::int64_t epochs = 1;     ///< used when max_steps is 0
  std::int64_t max_steps = 0;
  std::int64_t grad_accum_steps = 1;
  bool amp = false;
  at::ScalarType amp_dtype = at::kBFloat16;
  double grad_clip_norm = 0.0;  ///< 0: off
  std::int64_t eval_every = 0;  ///< 0: only at the end
  std::int64_t eval_batch_size = 1000;
  std::int64_t checkpoint_every = 0;  ///< 0: only at the end (and on interrupt)
  DdpOptions ddp;
  /// Folder for "rank<R>.pt" checkpoints; empty: no checkpoints.
  std::filesystem::path checkpoint_dir;
  /// Checkpoint to continue from (this rank's file); empty: start fresh.
  std::filesystem::path resume_from;
  /// Ranks at or above this one report their steps through rank 0: after the last step every
  /// rank's StepMetrics of this invocation are gathered to rank 0 (one collective) and handed to
  /// its sink's on_remote_steps. For ranks whose own records reach no store (other nodes, ranks
  /// under an external launcher). 0: nobody does (every rank's records are stored already).
  int report_steps_from_rank = 0;
};

/// One optimizer step as seen by this rank.
struct StepMetrics {
  std::int64_t step = 0;  ///< 1-based count of optimizer steps
  std::int64_t epoch = 0;
  double loss = 0.0;  ///< mean of this rank's micro-batch losses (unscaled)
  double lr = 0.0;
  double grad_scale = 1.0;
  bool skipped = false;  ///< GradScaler found inf/NaN on some rank
  double step_time_s = 0.0;
  double comm_wait_s = 0.0;  ///< time blocked on collectives during this step
  double samples_per_sec = 0.0;  ///< this rank's samples / step time
};

/// One evaluation over the whole test split (all ranks together).
struct EvalMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  double accuracy = 0.0;
};

/// Receives a rank's progress. Called on the training thread.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void on_step(const StepMetrics& metrics) = 0;
  virtual void on_eval(const EvalMetrics& metrics) = 0;
  /// A checkpoint was written (path and SHA-256 hex).
  virtual void on_checkpoint(const std::filesystem::path& path, const std::string& sha256) = 0;
  /// Rank 0 only, at the end: another rank's steps of this invocation (see
  /// TrainerConfig::report_steps_from_rank).
  virtual void on_remote_steps(int /*rank*/, const std::vector<StepMetrics>& /*steps*/) {}
};

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

/// Runs training. `stop` (may be null) requests a graceful stop: all ranks agree on it after
/// the current step, write a checkpoint and return with `interrupted` set.
TrainResult run_training(const TrainerConfig& config, MetricSink& sink, const std::atomic<bool>* stop = nullptr);

}  // namespace expctl::train
