#pragma once
/// Number and value spellings shared by every rendering (internal to the report module), so that
/// text, Markdown, HTML and JUnit never disagree about a value.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"

namespace expctl::report::detail {

/// Six significant digits; "n/a" when not finite.
std::string number(double value);
/// "+10.00%" / "-0.98%"; "-" when unknown.
std::string percent(const std::optional<double>& fraction);
/// A spec value for a diff: strings bare, everything else as compact JSON, null as "unset".
std::string value_text(const nlohmann::json& value);
/// "p=0.0012 (Holm 0.0036), ratio 0.900 [0.893, 0.907]" or the verdict's reason when untested.
std::string evidence_text(const compare::Verdict& verdict);
/// "runs n=5/5" (and ", 7 earlier" for timing rows with history) for sampled rows, "" otherwise.
std::string samples_text(const compare::MetricRow& row);
/// A timing row's run-level evidence: "noise ±3.1% a run, band ±9.0%, MDE 11.2%, p=0.21 (Holm 0.63)".
std::string run_evidence_text(const compare::RunLevelEvidence& evidence, const compare::Threshold& threshold);
/// The threshold cell: the threshold, or "exact" for rows judged bit for bit.
std::string threshold_text(const compare::MetricRow& row);
/// "samples_per_sec: <reason>" for every row that is not plainly ok (regressions, improvements,
/// inconclusive and too few samples), in table order.
std::vector<std::string> verdict_notes(const compare::Comparison& comparison);

/// "metric: B is 7.7% slower than A (95 % CI …)" for every metric with a value on both sides, in
/// table order: what changed by how much, printed under the verdict.
std::vector<std::string> change_lines(const compare::Comparison& comparison);
/// The history line: "7 earlier runs of the same spec on the same environment: id, id, ..." or "none ...".
std::string history_text(const compare::Comparison& comparison);
/// The header and cells of the per-run table: side, run, each timing metric's run value, and the
/// per-step throughput spread ("p5-p95 3912-4120 (9990 steps)").
std::vector<std::string> run_header(const compare::Comparison& comparison);
std::vector<std::vector<std::string>> run_rows(const compare::Comparison& comparison);
/// "higher" / "lower" better.
std::string better_text(const compare::MetricRow& row);
/// The run ids of a side, comma-separated.
std::string ids_text(const compare::SideInfo& side);
/// One line on the loss curves ("bitwise identical (...)", "diverge at step 12 ...").
std::string curve_text(const compare::CurveReport& curve);
/// The cells of one metrics-table row: metric, A, B, delta, rel, better, threshold, status.
std::vector<std::string> metric_cells(const compare::MetricRow& row);
/// Header of metric_cells.
std::vector<std::string> metric_header();

}  // namespace expctl::report::detail
