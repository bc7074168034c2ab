#pragma once
/// Renderings of a comparison (`expctl compare --format text|json|markdown|html`) and of a
/// nightly suite (JUnit XML, Markdown summary). Every rendering starts with the verdict line and
/// is a pure function of its input, so the same comparison always renders to the same bytes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/suite.hpp"

namespace expctl::report {

/// Version of the compare JSON document; bump on an incompatible change of its shape.
inline constexpr int k_json_version = 2;

/// The formats `expctl compare --format` accepts.
enum class Format { text, json, markdown, html };

/// "text", "json", "markdown", "html".
inline constexpr std::string_view k_format_names[] = {"text", "json", "markdown", "html"};

/// Parses a format name; nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);

/// How text is rendered.
struct TextOptions {
  bool color = false;  ///< ANSI colours for the verdict and section headings (a terminal)
};

/// Aligned plain text: verdict, runs, spec diff, environment diff, metrics table, loss curves.
std::string render_text(const compare::Comparison& comparison, const TextOptions& options = {});

/// The JSON document: {"format_version", "kind": "compare", "verdict", "outcome", "a", "b",
/// "not_comparable", "regressions", "spec_changes", "environment", "metrics", "loss_curve"}.
/// Non-finite numbers are null. Shape documented in docs/compare.md.
nlohmann::json to_json(const compare::Comparison& comparison);

/// GitHub-flavoured Markdown for a pull-request comment.
std::string render_markdown(const compare::Comparison& comparison);

/// One self-contained HTML file (inline CSS and SVG, no scripts, no external resources): the
/// verdict, both loss curves, both throughput distributions, the metrics table and the spec and
/// environment diffs. Plots carry ids "loss-curves" and "throughput" for tests.
std::string render_html(const compare::Comparison& comparison);

/// Renders `comparison` in `format` (JSON indented by two, with a final newline).
std::string render(const compare::Comparison& comparison, Format format, const TextOptions& options = {});

/// One entry of a nightly suite, graded (docs/nightly.md).
struct NightlyCase {
  std::string spec;                               ///< the candidate spec's name (or file when unnamed)
  std::optional<compare::Comparison> comparison;  ///< tonight against the baseline; nullopt: nothing to compare
  std::string skipped;                            ///< why there is no comparison
  std::string candidate;                          ///< run ids of tonight's runs, comma-separated
  std::string baseline;                           ///< what it was compared with ("tag baseline:x", ...)
  compare::EntryGrade grade;                      ///< pass / warn / fail per metric and for the entry
  /// The reruns of a suspected timing regression judged on their own (confirm-by-rerun).
  std::optional<compare::Comparison> confirmation;
  std::string confirmation_runs;  ///< what the reruns were: "3 reruns: id, id, id"
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

/// Escapes & < > " ' for XML and HTML text and attributes.
std::string xml_escape(std::string_view text);

}  // namespace expctl::report
