#pragma once
/// A night's renderings: JUnit XML for CI and the Markdown summary for people (docs/nightly.md,
/// "Reports"). Pure functions of the graded cases, so the same night renders to the same bytes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/compare/comparison.hpp"
#include "expctl/nightly/grade.hpp"

namespace expctl::nightly {

/// One entry of a nightly suite, graded (docs/nightly.md).
struct NightlyCase {
  std::string spec;                               ///< the candidate spec's name (or file when unnamed)
  std::optional<compare::Comparison> comparison;  ///< tonight against the baseline; nullopt: nothing to compare
  std::string skipped;                            ///< why there is no comparison
  std::string candidate;                          ///< run ids of tonight's runs, comma-separated
  std::string baseline;                           ///< what it was compared with ("tag baseline:x", ...)
  EntryGrade grade;                               ///< pass / warn / fail per metric and for the entry
  /// The reruns of a suspected timing regression judged on their own (confirm-by-rerun).
  std::optional<compare::Comparison> confirmation;
  std::string confirmation_runs;  ///< what the reruns were: "3 reruns: id, id, id"
  /// What changed between the entry's baseline runs and tonight's (spec fields, hashed files,
  /// the environment); empty when nothing did, and for an A/B entry.
  std::vector<std::string> changes;
};

/// JUnit XML: one <testsuite> per entry with its grade and verdict as properties; a
/// "comparable" case, a "reproducibility" case when strict reproducibility applies, and one
/// case per metric. A metric graded fail is a <failure> whose text is the full text report (and
/// the reruns' report); a warn is a <skipped> case whose message and text start with "warn: ",
/// with <system-out>; an entry with nothing to compare is one skipped case. Thresholds below
/// their noise floor are <system-out> notes of their metric's case and suite properties.
/// `timestamp` is ISO-8601.
std::string render_junit(std::string_view suite, const std::vector<NightlyCase>& cases, std::string_view timestamp);

/// The Markdown summary of a nightly: the counts per grade, one row per entry with its grade and
/// verdict, the warnings and notes, then each entry's report (and its reruns' report).
std::string render_nightly_markdown(std::string_view suite, const std::vector<NightlyCase>& cases,
                                    std::string_view date);

}  // namespace expctl::nightly
