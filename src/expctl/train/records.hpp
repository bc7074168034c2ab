#pragma once
/// The records a rank reports while it trains, as typed values with one codec. The step record's
/// fields are one table (`step_fields`): the JSON record, the all-gathered rows of remote ranks
/// and the store's per-step metrics are all generated from it, so a field is added in one place.
///
/// Records on the wire are JSON objects whose "t" names the kind:
///   {"t":"start","rank","world_size","total_steps","steps_per_epoch","resumed_from"}
///   {"t":"step", <every step field>}
///   {"t":"eval","step","loss","accuracy"}
///   {"t":"checkpoint","path","step","sha256","size_bytes"}
///   {"t":"remote_steps","rank","rows":[[<step fields in table order>],...]}  rank 0, at the end
///   {"t":"end","steps","interrupted","final_train_loss"}
/// Numbers are doubles that read back to the same value. NaN and ±Inf are values of the record,
/// never nulls: they travel as the strings "nan", "inf" and "-inf" (JSON has no such numbers).
/// This header includes no LibTorch.

#include <cstdint>
#include <optional>
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
  double comm_wait_s = 0.0;      ///< time blocked on collectives during this step
  double samples_per_sec = 0.0;  ///< this rank's samples / step time
};

/// One evaluation over the whole test split (all ranks together).
struct EvalMetrics {
  std::int64_t step = 0;
  double loss = 0.0;
  double accuracy = 0.0;
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

/// {"t":"eval","step","loss","accuracy"} and back.
nlohmann::json encode_eval(const EvalMetrics& metrics);
std::optional<EvalMetrics> decode_eval(const nlohmann::json& record);

}  // namespace expctl::train
