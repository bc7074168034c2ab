#pragma once
/// Renderings of a comparison (`expctl compare --format text|json|markdown|html`); a nightly's
/// (JUnit XML, Markdown summary) are the nightly module's (nightly/report.hpp). Every rendering starts with the verdict
/// line and is a pure function of its input, so the same comparison always renders to the same bytes.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"

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

/// Escapes & < > " ' for XML and HTML text and attributes.
std::string xml_escape(std::string_view text);

}  // namespace expctl::report
