#pragma once
/// The records a rank reports while it trains, as typed values with one codec. The step record's
/// fields are one table (`step_fields`): the JSON record, the all-gathered rows of remote ranks
/// and the store's per-step metrics are all generated from it, so a field is added in one place.
///
/// A rank reports them through a MetricSink (train/metric_sink.hpp), typed; across a pipe they are
/// JSON objects (train::RecordEncoder) whose "t" names the kind:
///   {"t":"start","rank","world_size","total_steps","steps_per_epoch","resume"}
///   {"t":"step", <every step field>}
///   {"t":"collectives","rank","allreduce"}   once the process group is up
///   {"t":"skipped_images","rank","files"}   image files passed over (data.on_bad_image skip), at the end
///   {"t":"eval","step","loss","accuracy","precision","fallback"}   the last two under AMP only
///   {"t":"checkpoint","path","step","sha256","size_bytes"}
///   {"t":"remote_steps","rank","rows":[[<step fields in table order>],...]}  rank 0, at the end
///   {"t":"end","steps","interrupted","final_train_loss"}
/// Numbers are doubles that read back to the same value. NaN and ±Inf are values of the record,
/// never nulls: they travel as the strings "nan", "inf" and "-inf" (JSON has no such numbers).
/// This header includes no LibTorch.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace expctl::train {

/// One optimizer step as seen by this rank.
struct StepMetrics {
  std::int64_t step = 0;  ///< 1-based count of optimizer steps
  std::int64_t epoch = 0;
  double loss = 0.0;  ///< mean of this rank's micro-batch losses (unscaled); NaN/Inf when diverged
  double lr = 0.0;
  double grad_scale = 1.0;
  bool skipped = false;  ///< the optimizer step was skipped (inf/NaN on some rank)
  double step_time_s = 0.0;
  double comm_wait_s = 0.0;      ///< exposed communication: time blocked on collectives in this step
  double samples_per_sec = 0.0;  ///< this rank's samples / step time
  // Where the step's time went (seconds, summed over its micro-batches). With comm_wait_s they
  // cover the step but for a few microseconds of bookkeeping.
  double data_wait_s = 0.0;     ///< gathering the micro-batches' inputs
  double forward_s = 0.0;       ///< forward pass and loss (up to the loss value on the host)
  double backward_s = 0.0;      ///< backward passes, launching the bucket all-reduces on the way
  double optimizer_s = 0.0;     ///< unscale, clip, optimizer step, scaler update (waits excluded)
  double allreduce_bytes = 0.0;  ///< gradient bytes this rank all-reduced in the step
};

/// A step's compute time: what a slow core or a busy neighbour stretches, unlike the waits.
inline double compute_seconds(const StepMetrics& m) { return m.forward_s + m.backward_s + m.optimizer_s; }

/// Where a rank is, for its heartbeats: written by the training thread at every phase change
/// (relaxed atomic stores, a few per step), read by the rank's heartbeat thread, so a rank that
/// hangs or is stopped is reported with the step, phase and bucket it was in.
enum class Phase : int { starting, data, forward, backward, comm_wait, optimizer, eval, checkpoint, finished };
/// "starting", "data", "forward", "backward", "comm_wait", "optimizer", "eval", "checkpoint", "finished".
const char* phase_name(Phase phase);

struct Beacon {
  std::atomic<std::int64_t> step{0};  ///< the optimizer step being worked on (1-based)
  std::atomic<int> phase{static_cast<int>(Phase::starting)};
  std::atomic<int> bucket{-1};  ///< the gradient bucket waited for in comm_wait, -1: none

  void enter(Phase now) { phase.store(static_cast<int>(now), std::memory_order_relaxed); }
  /// "step=42 phase=comm_wait bucket=0" (bucket only while waiting on one): the heartbeat payload.
  std::string where() const;
};

/// One evaluation over the whole test split (all ranks together).
struct EvalMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  /// Classification only (train.loss cross_entropy); absent for regression and model losses.
  std::optional<double> accuracy;
  /// Under train.amp, how it ran: "bf16 autocast" (as training does), "bf16 autocast with
  /// gradients on" (where the model's inference fast path does not support the autocast) or
  /// "fp32 without autocast"; empty without AMP.
  std::string precision = {};
  /// Why it did not run as training does ("under bf16 autocast the model failed: ..."); empty when it did.
  std::string fallback = {};
};

/// One field of the step record.
struct StepField {
  const char* key;     ///< name in the JSON record
  const char* metric;  ///< name of the stored per-step metric; nullptr: not stored as a metric
  double scale;        ///< record unit -> metric unit (seconds -> milliseconds: 1000)
  double (*get)(const StepMetrics&);
  void (*set)(StepMetrics&, double);
};

/// The step record's fields, in row order.
std::span<const StepField> step_fields();

/// A double as a JSON value: a number, or "nan" / "inf" / "-inf".
nlohmann::json encode_number(double value);
/// The inverse of encode_number; null reads as NaN (records of older versions). nullopt for
/// anything else.
std::optional<double> decode_number(const nlohmann::json& value);

/// {"t":"step", ...} with every field of step_fields().
nlohmann::json encode_step(const StepMetrics& metrics);
/// A step record back (fields missing or unreadable: nullopt).
std::optional<StepMetrics> decode_step(const nlohmann::json& record);

/// The step's fields as doubles in step_fields() order (for all-gathering), and back.
std::vector<double> step_row(const StepMetrics& metrics);
StepMetrics step_from_row(std::span<const double> row);
/// A row as a JSON array of encoded numbers, and back (wrong length or values: nullopt).
nlohmann::json encode_row(const StepMetrics& metrics);
std::optional<StepMetrics> decode_row(const nlohmann::json& row);

/// {"t":"eval","step","loss","accuracy","precision","fallback"} and back.
nlohmann::json encode_eval(const EvalMetrics& metrics);
std::optional<EvalMetrics> decode_eval(const nlohmann::json& record);

}  // namespace expctl::train
