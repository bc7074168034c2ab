#pragma once
/// The comparison model behind `expctl compare` and `expctl nightly`: two sides (one run each, or
/// groups of repeats), what differs between their specs and environments, every summary metric
/// judged against its threshold, the loss curves, and the verdict. Rendering lives in the report
/// module; this file decides.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/statistics.hpp"
#include "expctl/compare/thresholds.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"

namespace expctl::compare {

/// Per-step series whose values are samples (after warm-up, one value per step).
inline constexpr const char* k_throughput_series = "samples_per_sec";
inline constexpr const char* k_step_time_series = "step_time_ms";
/// Per-rank wait for gradient all-reduce per step, in ms (the runner's series).
inline constexpr const char* k_comm_wait_series = "comm_wait_ms";
/// Derived per-step samples: the share of a step's time (all ranks together) spent waiting.
inline constexpr const char* k_comm_wait_fraction_series = "comm_wait_fraction";
/// Rank 0's per-step training loss.
inline constexpr const char* k_loss_series = "loss";

/// Everything compare reads about one run.
struct RunData {
  store::RunRecord record;
  /// The spec's values (every field): the run folder's resolved.json "spec" when present,
  /// otherwise the hashed fields of the stored canonical form.
  nlohmann::json spec = nlohmann::json::object();
  nlohmann::json env_profile;                 ///< the pinned-stack profile content as hashed (null: none)
  std::optional<nlohmann::json> fingerprint;  ///< the stored environment fingerprint, when taken
  nlohmann::json summary = nlohmann::json::object();
  /// Per-step samples after warm-up: samples_per_sec summed over ranks, step_time_ms of the
  /// slowest rank (a step ends when the last rank's gradients are in) — as the runner's summary.
  std::map<std::string, std::vector<double>> samples;
  std::vector<std::int64_t> loss_steps;  ///< rank 0's steps of the loss curve
  std::vector<double> loss;              ///< rank 0's loss per step
};

/// Reads a run's spec, environment, summary and series from the store.
RunData load_run(const store::Store& store, const store::RunRecord& run);

/// Per-step samples of `series` after `warmup` steps, aggregated across ranks per step: the sum
/// for throughput, the maximum for times. Exposed for tests.
std::vector<double> step_samples(const std::vector<store::MetricPoint>& points, std::int64_t warmup, bool sum);

/// Per-step wait fractions after `warmup`: Σ comm_wait_ms / Σ step_time_ms over the ranks of
/// each step that has both (steps with zero total time are left out). Exposed for tests.
std::vector<double> wait_fraction_samples(const std::vector<store::MetricPoint>& waits,
                                          const std::vector<store::MetricPoint>& times, std::int64_t warmup);

/// How to compare.
struct CompareOptions {
  std::vector<std::string> ignore;            ///< spec key paths (or prefixes) left out of the spec diff
  std::vector<ThresholdOverride> thresholds;  ///< --threshold, over the spec's regression block
  SampleOptions samples;                      ///< alpha, minimum samples, bootstrap
};

/// Where a metric's numbers come from.
enum class MetricSource {
  value,         ///< one summary value per side
  step_samples,  ///< per-step samples (pooled over a group's runs)
  run_values,    ///< one summary value per run of a group
};

/// "value", "steps" or "runs".
std::string_view to_string(MetricSource source);

/// One row of the metrics table.
struct MetricRow {
  Verdict verdict;
  Direction direction = Direction::higher_is_better;
  Threshold threshold;
  std::string threshold_origin;  ///< "default", "spec" or "--threshold"
  std::string unit;
  MetricSource source = MetricSource::value;
  size_t n_a = 0;
  size_t n_b = 0;
};

/// The two loss curves.
struct CurveReport {
  bool available = false;  ///< both sides have a loss curve
  bool sha_equal = false;  ///< same loss_curve_sha256 in the summaries
  CurveComparison curves;  ///< of the first run of each side
  std::optional<std::int64_t> first_divergence_step;
  std::optional<std::int64_t> max_difference_step;
};

/// The overall outcome.
enum class Outcome { no_regression, regression, not_comparable };

/// A side of the comparison as a report shows it.
struct SideInfo {
  std::vector<std::string> run_ids;
  std::string name;        ///< the spec name of its first run
  std::string spec_hash;   ///< of its first run
  std::string started_at;  ///< of its first run
};

/// Everything a report shows.
struct Comparison {
  SideInfo a;
  SideInfo b;
  Outcome outcome = Outcome::no_regression;
  std::vector<std::string> not_comparable;     ///< reasons, when outcome is not_comparable
  std::vector<std::string> regressions;        ///< metric names with status regression
  std::vector<spec::SpecChange> spec_changes;  ///< after --ignore
  std::vector<std::string> ignored;            ///< the --ignore keys, as given
  bool env_available = false;                  ///< both sides have a fingerprint
  std::vector<env::DiffRow> env_changes;
  std::vector<MetricRow> metrics;  ///< in the metric table's order
  CurveReport curve;
  // Plot data (first run per side for curves, pooled samples for distributions).
  std::vector<std::int64_t> loss_steps_a, loss_steps_b;
  std::vector<double> loss_a, loss_b;
  std::vector<double> throughput_a, throughput_b;

  /// The first report line: "no regression", "regression in a, b", "not comparable: why".
  std::string verdict_line() const;
};

/// Compares side A (baseline) with side B (candidate); each side is one run or a group. Throws
/// util::CompareError for an empty side or a bad threshold override.
Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options);

/// The exit code for an outcome: 0 no regression, 3 regression, 2 not comparable.
int exit_code(Outcome outcome);

}  // namespace expctl::compare
