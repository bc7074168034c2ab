#pragma once
/// One rank of an `expctl run`, behind a torch-free API: the run module hands over the rank's
/// TrainerConfig (train/options.hpp, mapped from the spec by run::train_options) and gets progress
/// back as typed records through its MetricSink (train/metric_sink.hpp). This header includes none
/// of LibTorch.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "expctl/train/metric_sink.hpp"
#include "expctl/train/options.hpp"

namespace expctl::train {

/// Receives progress lines meant for people (rank 0 only, every metrics.log_every steps).
using LineSink = std::function<void(const std::string& line)>;

/// How the rank's training ended.
struct WorkerResult {
  std::int64_t steps = 0;  ///< optimizer steps done in total, including resumed ones
  bool interrupted = false;
  double final_train_loss = 0.0;
  std::optional<double> eval_accuracy;
};

/// Trains this rank, reporting to `sink` (on_start first, on_end last unless training throws).
/// `stop` (may be null) asks for a graceful stop: the ranks finish the current step, agree,
/// checkpoint and return with `interrupted` set. Throws util::TrainError for a bad configuration
/// (DivergedError when the loss stops being finite), missing data or a failed collective (the
/// message names what went wrong).
WorkerResult run_worker(const TrainerConfig& config, MetricSink& sink, const LineSink& on_line,
                        const std::atomic<bool>* stop);

/// Training-set size of a dataset as the trainer will see it (for the step count and ETA):
/// 60000 for fashion-mnist and mnist, 50000 for cifar10, synthetic_size for synthetic, the first
/// dimension of train_inputs for npy (its header is read; throws TrainError naming a bad file).
std::int64_t training_set_size(const DatasetOptions& data);

/// "1m05s", "42s": a duration for progress lines.
std::string eta_text(double seconds);

}  // namespace expctl::train
