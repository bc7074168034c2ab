#pragma once
/// A run's summary as one type with one codec (docs/run.md, "Summary"): the run engine writes it
/// (run/summary.cpp, run/record.cpp), `expctl run` prints it, compare, the sweep report and the
/// nightly read it. Keys are util::summary_key's. What the codec does not know (a program run's
/// `program` block, keys of a newer expctl) travels in `others`, unchanged.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace expctl::compare {

struct RunSummary {
  std::optional<double> final_train_loss;
  std::optional<double> eval_loss;
  std::optional<double> eval_accuracy;
  std::optional<double> samples_per_sec;   ///< median of the job's per-step throughput after warm-up
  std::optional<double> step_time_ms_p50;  ///< of the slowest rank's step times after warm-up
  std::optional<double> step_time_ms_p95;
  std::optional<double> comm_wait_fraction;  ///< none when no rank timed its communication wait
  std::optional<std::string> loss_curve_sha256;
  std::int64_t steps = 0;
  std::int64_t skipped_steps = 0;
  std::int64_t warmup_steps = 0;
  std::int64_t ranks_recorded = 0;
  std::optional<double> wall_time_s;  ///< over every invocation
  std::optional<double> time_to_first_step_s;
  std::int64_t invocations = 0;
  nlohmann::json phases = nlohmann::json::array();  ///< compare::phases_json
  nlohmann::json allreduce = nullptr;               ///< the all-reduce that ran (a name), null when unknown
  std::optional<std::int64_t> world_size;
  std::optional<nlohmann::json> drift;               ///< pins accepted with --allow-drift
  std::optional<std::int64_t> skipped_images;        ///< files skipped with data.on_bad_image: skip
  nlohmann::json others = nlohmann::json::object();  ///< every other key, as written
};

/// The stored JSON object: every field above (absent values null), `world_size`, `drift` and
/// `skipped_images` only when set, then `others`.
nlohmann::json to_json(const RunSummary& summary);

/// Reads a stored summary (anything not an object reads as an empty summary); a field of the wrong
/// type reads as unset.
RunSummary summary_from_json(const nlohmann::json& summary);

}  // namespace expctl::compare
