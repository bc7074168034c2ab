#pragma once
/// A nightly suite (`expctl nightly SUITE.yaml`) and how one night of it is graded
/// (docs/nightly.md):
///
///   suite: nightly              # name, used in the JUnit XML and the Markdown summary
///   repeat: 5                   # defaults for every entry (each may set its own)
///   confirm_rounds: 3
///   baseline_nights: 5
///   specs:
///     - spec: tiny-synthetic.yaml   # relative to the suite file's directory
///       set: [train.max_steps=40]   # optional --set overrides
///       repeat: 5                   # runs per night (default 1; `repeats` is the older spelling)
///       confirm_rounds: 3           # reruns of a suspected timing regression (default 3; 0: fail at once)
///       baseline_nights: 5          # rolling baseline: the entry's runs of its last K nights (default 5)
///       baseline:                   # optional: an A/B entry, judged against this configuration tonight
///         spec: tiny-synthetic.yaml
///         set: [model.hidden_sizes=[32]]
///       thresholds:                 # fail thresholds, over the spec's `regression:` block
///         samples_per_sec: -10%
///       warn:                       # warn thresholds: worse than these, within `thresholds`: warn
///         samples_per_sec: -5%
///
/// Thresholds live in versioned files only: the spec's `regression:` block, then the suite's
/// `thresholds:`; `expctl nightly` takes no --threshold.

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/thresholds.hpp"
#include "expctl/store/types.hpp"

namespace expctl::compare {

inline constexpr int k_default_repeat = 1;
inline constexpr int k_default_confirm_rounds = 3;
inline constexpr int k_default_baseline_nights = 5;

/// A configuration to run: a spec file and its --set overrides.
struct SuiteConfig {
  std::filesystem::path spec;  ///< resolved against the suite file's directory
  std::vector<std::string> overrides;
};

/// One entry of a suite.
struct SuiteEntry {
  std::filesystem::path spec;  ///< resolved against the suite file's directory
  int repeats = k_default_repeat;
  std::vector<std::string> overrides;  ///< "key.path=value", as --set
  int confirm_rounds = k_default_confirm_rounds;
  int baseline_nights = k_default_baseline_nights;
  /// An A/B entry: both configurations run interleaved each night and the baseline is tonight's
  /// runs of this one. Without it the baseline is the entry's own runs (pinned or rolling).
  std::optional<SuiteConfig> baseline;
  std::vector<ThresholdOverride> thresholds;  ///< fail thresholds (over the spec's regression block)
  std::vector<ThresholdOverride> warn;        ///< warn thresholds, each inside its fail threshold
  std::string where;                          ///< "suite.yaml: specs[0]", for errors found later
};

/// A parsed suite.
struct Suite {
  std::string name;
  std::vector<SuiteEntry> specs;
};

/// Reads a suite file. Throws util::CompareError (exit 2) naming the file, the entry and the fix.
Suite load_suite(const std::filesystem::path& file);

/// The fail threshold of `metric` for an entry whose candidate spec has `spec_values`: the
/// suite's, else the spec's `regression:` block, else the metric table's default.
Threshold fail_threshold(const SuiteEntry& entry, const MetricInfo& metric, const nlohmann::json& spec_values);

/// Throws util::CompareError when a warn threshold is not strictly inside its fail threshold (or
/// is written in another unit): such a warn band could never warn.
void check_warn_thresholds(const SuiteEntry& entry, const nlohmann::json& spec_values);

// ---------------------------------------------------------------------------------------------
// The nightly's own records: tags on the runs it makes.

inline constexpr std::string_view k_night_tag = "nightly:";                    ///< a candidate run of night D
inline constexpr std::string_view k_night_baseline_tag = "nightly-baseline:";  ///< an A/B baseline run of D
inline constexpr std::string_view k_confirm_tag = "nightly-confirm:";          ///< a confirmation run of D
inline constexpr std::string_view k_failed_tag = "nightly-fail:";              ///< a candidate of a night that failed

/// The night (YYYY-MM-DD) of a run's tag with `prefix`; empty when it has none.
std::string night_of(const store::RunRecord& run, std::string_view prefix);

/// True when the run carries a k_failed_tag.
bool from_failed_night(const store::RunRecord& run);

/// The rolling baseline: the completed runs tagged nightly:<d> of the `nights` most recent
/// nights d before `date`, leaving out runs of a night that failed (a regression never becomes
/// the baseline by waiting). `runs` are one configuration's; order is kept.
std::vector<store::RunRecord> rolling_baseline(std::span<const store::RunRecord> runs, std::string_view date,
                                               int nights);

/// The distinct nights of `runs` (tag nightly:), newest first.
std::vector<std::string> nights_of(std::span<const store::RunRecord> runs);

/// Completed runs with a tag `prefix` + `date`.
std::vector<store::RunRecord> runs_of_night(std::span<const store::RunRecord> runs, std::string_view prefix,
                                            std::string_view date);

// ---------------------------------------------------------------------------------------------
// Grading a night.

/// The grade of an entry or metric: pass; warn (the night passes, the summary says why); fail.
enum class Grade { pass, warn, fail };

/// "pass", "warn", "fail".
std::string_view to_string(Grade grade);

/// One metric's grade with its one-line reason (empty for a plain pass).
struct MetricGrade {
  std::string metric;
  Grade grade = Grade::pass;
  std::string reason;
};

/// What is known about confirming a suspected timing regression.
struct Confirmation {
  int rounds = 0;                          ///< the entry's confirm_rounds (0: fail without rerun)
  const Comparison* comparison = nullptr;  ///< the reruns judged; nullptr when none ran
  std::string missing;                     ///< why none ran although rounds > 0
  std::string label = "reruns";            ///< "3 interleaved rounds", for reasons
};

/// A threshold below its metric's measured run-to-run noise: the gate cannot see a regression
/// of that size in one run.
struct NoiseNote {
  std::string metric;
  std::string text;
};

/// An entry's night.
struct EntryGrade {
  Grade grade = Grade::pass;
  std::vector<MetricGrade> metrics;    ///< one per metric row of the first comparison, then extra cases
  std::vector<std::string> confirmed;  ///< timing metrics whose regression the reruns confirmed
  std::vector<NoiseNote> notes;        ///< thresholds below their measured noise floor
  std::string line;                    ///< "fail: ...", "warn: ...", "pass: ..."

  /// The grade of `metric`; nullptr when it has none.
  const MetricGrade* find(std::string_view metric) const;
};

/// Timing metrics that `comparison` calls a regression.
std::vector<std::string> timing_regressions(const Comparison& comparison);

/// True when a correctness check failed: reproducibility, or a non-timing metric's regression.
/// Those fail the night without a rerun (they are exact, or not the machine's noise).
bool correctness_failed(const Comparison& comparison);

/// True when `first` needs reruns before it may fail: a timing regression and nothing else.
bool needs_confirmation(const Comparison& first);

/// One note per timing metric whose threshold is below its measured run-to-run noise
/// (compare::threshold_below_noise), saying where to change it.
std::vector<NoiseNote> noise_floor_notes(const Comparison& comparison);

/// Grades an entry: `first` (tonight against the baseline, fail thresholds), `warn_view` (the
/// same runs against the warn thresholds; nullptr when the entry has none) and the confirmation.
EntryGrade grade_entry(const Comparison& first, const Comparison* warn_view, const Confirmation& confirmation);

/// Marks rows whose threshold came from the suite (given to compare as overrides) as "suite".
void label_suite_thresholds(Comparison& comparison);

}  // namespace expctl::compare
