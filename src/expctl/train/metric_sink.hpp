#pragma once
/// How a rank reports while it trains: one typed call per record (train/records.hpp's kinds), on
/// the training thread. The plugin's run_worker hands these calls to the caller's sink as they
/// are, so a rank that records in its own process (rank 0 under an external launcher) never
/// encodes and decodes its records; RecordEncoder puts them on the wire for a rank whose
/// supervisor is another process. This header includes no LibTorch.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/records.hpp"

namespace expctl::train {

/// The worker's first record: where this rank trains and how far.
struct TrainingStart {
  int rank = 0;
  int world_size = 1;
  std::int64_t total_steps = 0;
  std::int64_t steps_per_epoch = 0;
  bool resume = false;
};

/// The worker's last record (not sent when training threw).
struct TrainingEnd {
  std::int64_t steps = 0;  ///< optimizer steps done in total, including resumed ones
  bool interrupted = false;
  double final_train_loss = 0.0;
};

/// Receives a rank's progress. Called on the training thread.
class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void on_start(const TrainingStart& /*start*/) {}
  virtual void on_step(const StepMetrics& metrics) = 0;
  virtual void on_eval(const EvalMetrics& metrics) = 0;
  /// A checkpoint was written and indexed.
  virtual void on_checkpoint(const CheckpointFile& file) = 0;
  /// Rank 0 only, at the end: another rank's steps of this invocation (see
  /// TrainerConfig::report_steps_from_rank).
  virtual void on_remote_steps(int /*rank*/, const std::vector<StepMetrics>& /*steps*/) {}
  /// Once, when the process group is up: which all-reduce algorithm runs
  /// (Communicator::allreduce_algorithm).
  virtual void on_collectives(const std::string& /*allreduce*/) {}
  /// Before the final evaluation: the image files this rank passed over because they do not
  /// decode (data.on_bad_image skip); not called when there are none.
  virtual void on_skipped_images(const std::vector<std::string>& /*files*/) {}
  virtual void on_end(const TrainingEnd& /*end*/) {}
};

/// Each record as its JSON object on the wire (train/records.hpp), handed to `out`: what a rank
/// sends its supervisor over the control channel. `rank` is the reporting rank.
class RecordEncoder : public MetricSink {
 public:
  RecordEncoder(int rank, std::function<void(const nlohmann::json& record)> out);
  void on_start(const TrainingStart& start) override;
  void on_step(const StepMetrics& metrics) override;
  void on_eval(const EvalMetrics& metrics) override;
  void on_checkpoint(const CheckpointFile& file) override;
  /// One record per block of steps, each line a few hundred KB at most.
  void on_remote_steps(int rank, const std::vector<StepMetrics>& steps) override;
  void on_collectives(const std::string& allreduce) override;
  void on_skipped_images(const std::vector<std::string>& files) override;
  void on_end(const TrainingEnd& end) override;

 private:
  int m_rank;
  std::function<void(const nlohmann::json&)> m_out;
};

}  // namespace expctl::train
