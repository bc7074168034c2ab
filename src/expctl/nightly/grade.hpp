#pragma once
/// Grading one entry of a night (docs/nightly.md, "Grades"): pass, warn or fail per metric and for
/// the entry, from tonight's comparison, its warn view and the reruns of a suspected timing
/// regression. Pure functions of compare's comparisons.

#include <string>
#include <string_view>
#include <vector>

#include "expctl/compare/comparison.hpp"

namespace expctl::nightly {

/// The grade of an entry or metric: pass; warn (the night passes, the summary says why); fail.
enum class Grade { pass, warn, fail };

/// "pass", "warn", "fail".
std::string_view to_string(Grade grade);

/// One metric's grade with its one-line reason (empty for a plain pass).
struct MetricGrade {
  std::string metric;
  Grade grade = Grade::pass;
  std::string reason;
  /// A correctness metric that changed with the spec: a pass, the change being what was asked for.
  bool expected_change = false;
};

/// What is known about confirming a suspected timing regression.
struct Confirmation {
  int rounds = 0;                                   ///< the entry's confirm_rounds (0: fail without rerun)
  const compare::Comparison* comparison = nullptr;  ///< the reruns judged; nullptr when none ran
  std::string missing;                              ///< why none ran although rounds > 0
  std::string label = "reruns";                     ///< "3 interleaved rounds", for reasons
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
std::vector<std::string> timing_regressions(const compare::Comparison& comparison);

/// True when a correctness check failed: reproducibility, or a non-timing metric's regression.
/// Those fail the night without a rerun (they are exact, or not the machine's noise). With
/// `spec_changed` (the baseline ran another spec, or other hashed files) a change of a
/// correctness metric is what the change made: expected, never a failure.
bool correctness_failed(const compare::Comparison& comparison, bool spec_changed = false);

/// True when `first` needs reruns before it may fail: a timing regression and nothing else.
bool needs_confirmation(const compare::Comparison& first, bool spec_changed = false);

/// One note per timing metric whose threshold is below its measured run-to-run noise
/// (compare::threshold_below_noise), saying where to change it.
std::vector<NoiseNote> noise_floor_notes(const compare::Comparison& comparison);

/// Grades an entry: `first` (tonight against the baseline, fail thresholds), `warn_view` (the
/// same runs against the warn thresholds; nullptr when the entry has none) and the confirmation.
/// `spec_changed`: as for correctness_failed (a correctness metric's change then passes, saying so).
EntryGrade grade_entry(const compare::Comparison& first, const compare::Comparison* warn_view,
                       const Confirmation& confirmation, bool spec_changed = false);

/// Marks rows whose threshold came from the suite (given to compare as overrides) as "suite".
void label_suite_thresholds(compare::Comparison& comparison);

}  // namespace expctl::nightly
