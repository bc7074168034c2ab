#pragma once
/// One rank of an `expctl run`, behind a torch-free API: the CLI hands over the resolved spec
/// values and the rank's place in the job, and gets progress back as JSON records. Only this
/// module includes LibTorch; this header includes none of it.
///
/// Records (one JSON object each, field "t" names the kind):
///   {"t":"start","rank","world_size","total_steps","steps_per_epoch","resumed_at"}
///   {"t":"step","step","epoch","loss","lr","grad_scale","skipped","step_time_s","comm_wait_s","samples_per_sec"}
///   {"t":"eval","step","loss","accuracy"}
///   {"t":"checkpoint","path","sha256","size_bytes"}
///   {"t":"remote_steps","rank","rows":[[step,epoch,loss,lr,grad_scale,skipped,step_time_s,
///                                      comm_wait_s,samples_per_sec],...]}   rank 0 only, at the end
///   {"t":"end","steps","interrupted","final_train_loss"}
/// Numbers are doubles printed so that they read back to the same value.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace expctl::train {

/// Where this rank stands in the job (torchrun's contract, already parsed).
struct WorkerPlacement {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = 29500;
  /// The launcher hosts the rendezvous store; rank 0 joins it as a client instead of hosting it.
  bool store_hosted_by_launcher = false;
  /// Meet in a c10d FileStore at this path (single node) instead of a TCP store.
  std::string rendezvous_file;
};

/// What one rank trains.
struct WorkerRequest {
  /// The resolved spec (spec::Spec::values(): every field, defaults filled in).
  nlohmann::json spec;
  WorkerPlacement placement;
  /// Folder for this rank's "rank<R>.pt" checkpoint; empty: no checkpoints.
  std::filesystem::path checkpoint_dir;
  /// Continue from checkpoint_dir/rank<R>.pt when that file exists (else start fresh).
  bool resume = false;
  /// Ranks from this one up have no store of their own reachable from here (another node's, or
  /// under an external launcher): at the end rank 0 reports their steps as "remote_steps"
  /// records. 0: every rank's records are stored already.
  int report_steps_from_rank = 0;
};

/// Receives each record (see above), on the training thread.
using RecordSink = std::function<void(const nlohmann::json& record)>;
/// Receives progress lines meant for people (rank 0 only, every metrics.log_every steps).
using LineSink = std::function<void(const std::string& line)>;

/// How the rank's training ended.
struct WorkerResult {
  std::int64_t steps = 0;  ///< optimizer steps done in total, including resumed ones
  bool interrupted = false;
  double final_train_loss = 0.0;
  std::optional<double> eval_accuracy;
};

/// Trains this rank. `stop` (may be null) asks for a graceful stop: the ranks finish the current
/// step, agree, checkpoint and return with `interrupted` set. Throws util::TrainError for a bad
/// configuration, missing data or a failed collective (the message names what went wrong).
WorkerResult run_worker(const WorkerRequest& request, const RecordSink& on_record, const LineSink& on_line,
                        const std::atomic<bool>* stop);

/// Training-set size of a dataset as the trainer will see it (for the step count and ETA):
/// 60000 for fashion-mnist and mnist, 50000 for cifar10, data.num_samples for synthetic.
std::int64_t training_set_size(const nlohmann::json& spec);

/// "1m05s", "42s": a duration for progress lines.
std::string eta_text(double seconds);

}  // namespace expctl::train
