#pragma once
/// The comparison model behind `expctl compare` and `expctl nightly`: two sides (one run each, or
/// groups of repeats), what differs between their specs and environments, every summary metric
/// judged against its threshold, the loss curves, and the verdict. Rendering lives in the report
/// module; this file decides.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/phases.hpp"
#include "expctl/compare/run_noise.hpp"
#include "expctl/compare/statistics.hpp"
#include "expctl/compare/thresholds.hpp"
#include "expctl/env/diff.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::compare {

/// Per-step series whose values are samples (after warm-up, one value per step).
inline constexpr const char* k_throughput_series = util::metric::samples_per_sec;
inline constexpr const char* k_step_time_series = util::metric::step_time_ms;
/// Per-rank wait for gradient all-reduce per step, in ms (the runner's series).
inline constexpr const char* k_comm_wait_series = util::metric::comm_wait_ms;
/// Derived per-step samples: the share of a step's time (all ranks together) spent waiting.
inline constexpr const char* k_comm_wait_fraction_series = util::metric::comm_wait_fraction;
/// Rank 0's per-step training loss.
inline constexpr const char* k_loss_series = util::metric::loss;

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
  /// They describe the run (spread, plots) and stand in for summary values a run lacks; they are
  /// never replicates across runs. step_time_ms and comm_wait_fraction are read only when the
  /// summary lacks their run values.
  std::map<std::string, std::vector<double>> samples;
  std::vector<std::int64_t> loss_steps;  ///< rank 0's steps of the loss curve
  std::vector<double> loss;              ///< rank 0's loss per step
  /// Every rank's per-step loss (the reproducibility check names the first differing step and
  /// rank); empty when the run was loaded without series (history) or built by hand.
  std::vector<store::SeriesColumns> loss_ranks;
  /// Run values computed from the stored series where the summary lacks them (run_value): e.g.
  /// comm_wait_fraction = Σ comm_wait_ms / Σ step_time_ms after warm-up, summed by SQLite.
  std::map<std::string, double> computed;
  /// Where each rank's step time went, and the per-step worst straggler score (empty for runs
  /// of one rank or of older versions); for the reports' phase bars and straggler timeline.
  std::vector<RankPhases> phases;
  StragglerTimeline straggler;
};

/// Optimizer steps treated as warm-up and left out of every timing statistic (the runner's summary
/// and compare alike): min(10, steps / 10).
std::int64_t default_warmup_steps(std::int64_t steps);

/// SHA-256 (hex) of the losses as consecutive float32 little-endian bit patterns: the runner's
/// summary.loss_curve_sha256, which compare holds equal or not.
std::string loss_curve_sha256(const std::vector<double>& losses);

/// Reads a run's spec, environment, summary and series from the store: the loss of every rank,
/// per-step throughput summed over ranks, and the step times only where the summary lacks their
/// run values (the wait share then comes from SQL sums, never rows). Column reads
/// (Store::series_columns); the phase rows from the summary. Two 100k-step 2-rank runs load in
/// about 0.3 s on a 2-core machine (bench/compare_scale.sh).
struct LoadOptions {
  bool straggler_timeline = true;  ///< read every rank's straggler score (only the HTML report plots it)
};
RunData load_run(const store::Store& store, const store::RunRecord& run, const LoadOptions& options = {});

/// load_run of each record, in order, several at once: up to one per core (at most 4), each on a
/// reading connection of its own (Store::open_reader; the store's own serves one of them). A
/// store on a server reads two runs' series in about half the time (the server scans each series
/// in its own process); a backend without readers, or a reader that cannot be opened, loads them
/// one after the other. The first failure (in record order) is thrown once every load has ended.
std::vector<RunData> load_runs(const store::Store& store, const std::vector<store::RunRecord>& records,
                               const LoadOptions& options = {});

/// Both sides of a comparison, loaded together by load_runs (so A's and B's runs share the
/// readers): first A's runs, then B's, each in its records' order.
std::pair<std::vector<RunData>, std::vector<RunData>> load_both(const store::Store& store,
                                                                const std::vector<store::RunRecord>& a,
                                                                const std::vector<store::RunRecord>& b,
                                                                const LoadOptions& options = {});

/// A run as history: its record and summary only (no spec, environment or series are read).
RunData history_run(const store::RunRecord& run);

/// Which earlier runs inform the run-to-run noise.
struct HistoryOptions {
  size_t limit = 20;  ///< the newest runs per configuration
};

/// The history of a comparison: for each configuration of a side (the spec hash and environment
/// hash of its runs), the completed runs of that configuration that started no later than the
/// newest compared run, other than the compared runs, newest first (at most options.limit per
/// configuration), loaded with history_run. A side without an environment hash has no history.
/// Later runs never change an earlier comparison's report.
std::vector<RunData> load_history(const store::Store& store, const std::vector<RunData>& a,
                                  const std::vector<RunData>& b, const HistoryOptions& options = {});

/// The run value of a timing metric: the summary's (as the runner computed it from every step
/// after warm-up), else RunData::computed, else computed the same way from the run's per-step
/// samples; NaN when none of them has it.
double run_value(const RunData& run, const MetricInfo& metric);

/// The run values of `metric` for each run, one group per configuration (spec hash + environment
/// hash), in first-seen order: the history groups judge_run_level takes.
std::vector<std::vector<double>> values_by_configuration(const std::vector<RunData>& runs, const MetricInfo& metric);

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
  SampleOptions samples;                      ///< correctness metrics over groups: alpha, minimum samples, bootstrap
  NoiseOptions noise;                         ///< timing metrics: alpha, power, --repeat suggestions
};

/// Where a metric's numbers come from.
enum class MetricSource {
  value,         ///< one summary value per side
  step_samples,  ///< per-step samples: no longer a source of any verdict (kept for the spelling "steps")
  run_values,    ///< one value per run: every timing metric, and correctness metrics of groups
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
  size_t history_runs = 0;  ///< earlier runs behind a timing metric's noise estimate
  /// Judged bit for bit (a correctness metric of the same spec on the same environment under
  /// strict determinism), not against its threshold.
  bool exact = false;
  /// Runs with a value on each side. For a correctness metric n_a/n_b count distinct observations
  /// (copies of one trajectory count once, replicates.hpp), so they may be fewer.
  size_t runs_a = 0;
  size_t runs_b = 0;
  bool paired = false;  ///< judged on seed pairs (n_a = n_b = pairs)
  /// A correctness metric with one trajectory a side (copies count once): judged against the
  /// threshold as a fact about one seed, with no test.
  bool one_trajectory = false;
  /// What changed by how much, in words: "B is 7.7% slower than A (95 % CI -9.1% to -6.2%, 5+5
  /// runs)", "B is 0.8% higher than A (one trajectory per side: no interval; vary the seed to
  /// judge it)". Empty when a side has no value.
  std::string change;
};

/// Strict reproducibility: the same spec on the same environment with determinism strict must
/// give bitwise identical loss curves (every rank) and evaluation metrics.
struct Reproducibility {
  /// Every run of both sides has the same spec hash and environment hash, and determinism strict.
  bool required = false;
  bool identical = true;             ///< every run matches A's first run bit for bit
  std::string run_id;                ///< the first run that does not (empty when identical)
  std::optional<std::int64_t> step;  ///< the first step whose loss differs (on any rank)
  std::optional<int> rank;           ///< the lowest rank that differs at that step
  std::vector<std::string> metrics;  ///< evaluation metrics whose values differ bitwise
  std::string reason;                ///< one line (empty unless required)
};

/// The two loss curves.
struct CurveReport {
  bool available = false;  ///< both sides have a loss curve
  bool sha_equal = false;  ///< same loss_curve_sha256 in the summaries
  CurveComparison curves;  ///< of the first run of each side
  std::optional<std::int64_t> first_divergence_step;
  std::optional<std::int64_t> max_difference_step;
};

/// The overall outcome. Inconclusive: no regression found, but a timing metric could not be
/// decided (exit 0 unless --fail-on-inconclusive).
enum class Outcome { no_regression, regression, not_comparable, inconclusive };

/// "no_regression", "regression", "not_comparable", "inconclusive".
std::string_view to_string(Outcome outcome);

/// A compared run as the report describes it.
struct RunDescription {
  std::string side;  ///< "A" or "B"
  std::string run_id;
  std::vector<std::pair<std::string, double>> values;  ///< run values of the timing metrics, table order (NaN: none)
  /// Per-step throughput after warm-up (summed over ranks): steps and p5 / p50 / p95; count 0
  /// when not loaded. Describes the run; never a replicate.
  size_t steps = 0;
  double p5 = 0;
  double p50 = 0;
  double p95 = 0;
};

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
  std::vector<std::string> not_comparable;  ///< reasons, when outcome is not_comparable
  std::vector<std::string>
      regressions;  ///< "reproducibility" first when it failed, then metrics with status regression
  std::vector<std::string> inconclusive;  ///< metric names with status inconclusive
  Reproducibility reproducibility;
  std::vector<std::string> history;            ///< ids of the earlier runs behind the noise estimates
  std::vector<RunDescription> runs;            ///< every compared run, A's then B's
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
  std::vector<RankPhases> phases_a, phases_b;  ///< first run per side
  StragglerTimeline straggler_a, straggler_b;  ///< first run per side

  /// The first report line: "no regression"; "regression in a, b" (after
  /// "reproducibility regression: first difference at step S on rank R" when that failed);
  /// "inconclusive: <metric> <why, and what to rerun>"; "not comparable: why".
  std::string verdict_line() const;
};

/// Compares side A (baseline) with side B (candidate); each side is one run or a group. `history`
/// (load_history) informs the run-to-run noise of the timing metrics only. Throws
/// util::CompareError for an empty side or a bad threshold override.
Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options,
                        const std::vector<RunData>& history);

/// compare_runs without history.
Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options);

/// The exit code for an outcome: 0 no regression or inconclusive, 3 regression, 2 not comparable.
int exit_code(Outcome outcome);

/// As exit_code, with inconclusive exiting 3 when `fail_on_inconclusive` (--fail-on-inconclusive).
int exit_code(Outcome outcome, bool fail_on_inconclusive);

}  // namespace expctl::compare
