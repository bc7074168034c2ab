#include "expctl/report/format.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace expctl::report::detail {

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{:.6g}", value) : "n/a";
}

std::string percent(const std::optional<double>& fraction) {
  return fraction && std::isfinite(*fraction) ? fmt::format("{:+.2f}%", *fraction * 100.0) : "-";
}

std::string value_text(const nlohmann::json& value) {
  if (value.is_null()) {
    return "unset";
  }
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string run_evidence_text(const compare::RunLevelEvidence& evidence, const compare::Threshold& threshold) {
  if (!evidence.noise.known()) {
    return "noise unknown (no configuration has two runs)";
  }
  return fmt::format("noise ±{} a run, band ±{}, MDE {}, {}", compare::size_text(evidence.noise_fraction, threshold),
                     compare::size_text(evidence.band, threshold), compare::size_text(evidence.mde, threshold),
                     compare::significance_text("t-test", evidence.p_value, evidence.adjusted_p, evidence.level,
                                                evidence.alpha, evidence.family));
}

std::vector<std::string> change_lines(const compare::Comparison& comparison) {
  std::vector<std::string> lines;
  for (const auto& row : comparison.metrics) {
    if (!row.change.empty()) {
      lines.push_back(fmt::format("{}: {}", row.verdict.metric, row.change));
    }
  }
  return lines;
}

std::string threshold_text(const compare::MetricRow& row) {
  return row.exact ? "exact" : row.threshold.to_string();
}

std::vector<std::string> verdict_notes(const compare::Comparison& comparison) {
  std::vector<std::string> notes;
  for (const auto& row : comparison.metrics) {
    if (row.verdict.status != compare::Status::ok) {
      notes.push_back(fmt::format("{}: {}", row.verdict.metric, row.verdict.reason));
    }
  }
  return notes;
}

std::string history_text(const compare::Comparison& comparison) {
  if (comparison.history.empty()) {
    return "none (no earlier completed runs of these specs on these environments)";
  }
  std::string ids;
  for (const auto& id : comparison.history) {
    ids += (ids.empty() ? "" : ", ") + id;
  }
  return fmt::format("{} earlier run{} of these specs on these environments: {}", comparison.history.size(),
                     comparison.history.size() == 1 ? "" : "s", ids);
}

namespace {

// The timing metrics some compared run has a value of, in table order.
std::vector<size_t> run_columns(const compare::Comparison& comparison) {
  std::vector<size_t> columns;
  const size_t count = comparison.runs.empty() ? 0 : comparison.runs.front().values.size();
  for (size_t i = 0; i < count; ++i) {
    const bool any =
        std::any_of(comparison.runs.begin(), comparison.runs.end(),
                    [&](const compare::RunDescription& run) { return std::isfinite(run.values[i].second); });
    if (any)
      columns.push_back(i);
  }
  return columns;
}

}  // namespace

std::vector<std::string> run_header(const compare::Comparison& comparison) {
  std::vector<std::string> header = {"side", "run"};
  for (const size_t i : run_columns(comparison)) {
    header.push_back(comparison.runs.front().values[i].first);
  }
  header.push_back("per-step samples/s p5-p95");
  return header;
}

std::vector<std::vector<std::string>> run_rows(const compare::Comparison& comparison) {
  const auto columns = run_columns(comparison);
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : comparison.runs) {
    std::vector<std::string> cells = {run.side, run.run_id};
    for (const size_t i : columns) cells.push_back(number(run.values[i].second));
    cells.push_back(run.steps == 0 ? "-" : fmt::format("{}-{} ({} steps)", number(run.p5), number(run.p95), run.steps));
    rows.push_back(std::move(cells));
  }
  return rows;
}

std::string evidence_text(const compare::Verdict& verdict) {
  if (verdict.run_evidence) {
    return verdict.reason;
  }
  if (!verdict.evidence) {
    return verdict.reason;
  }
  const auto& evidence = *verdict.evidence;
  std::string text = compare::significance_text(compare::to_string(evidence.decided_by), evidence.p_value,
                                                evidence.adjusted_p, evidence.level, evidence.alpha, evidence.family);
  if (evidence.paired) {
    return text;
  }
  if (evidence.ratio) {
    text += fmt::format(", ratio {:.3f} [{:.3f}, {:.3f}]", evidence.ratio->estimate, evidence.ratio->low,
                        evidence.ratio->high);
  }
  return text;
}

std::string samples_text(const compare::MetricRow& row) {
  if (row.source == compare::MetricSource::value) {
    return "";
  }
  if (row.paired) {
    return fmt::format("seed pairs n={}", row.n_a);
  }
  std::string text = fmt::format("{} n={}/{}", compare::to_string(row.source), row.n_a, row.n_b);
  if (!row.exact && (row.n_a < row.runs_a || row.n_b < row.runs_b)) {
    text += fmt::format(" (distinct, of {}/{} runs)", row.runs_a, row.runs_b);
  }
  return row.history_runs == 0 ? text : fmt::format("{}, {} earlier", text, row.history_runs);
}

std::string better_text(const compare::MetricRow& row) {
  return std::string(compare::to_string(row.direction));
}

std::string ids_text(const compare::SideInfo& side) {
  std::string text;
  for (const auto& id : side.run_ids) {
    text += (text.empty() ? "" : ",") + id;
  }
  return text;
}

std::string curve_text(const compare::CurveReport& curve) {
  if (!curve.available) {
    return "not available (a run has no loss series)";
  }
  if (curve.curves.identical) {
    return fmt::format("bitwise identical ({} steps{})", curve.curves.length_a,
                       curve.sha_equal ? ", same loss_curve_sha256" : "");
  }
  std::string text = "differ";
  if (curve.first_divergence_step) {
    text += fmt::format(": first diverging step {}", *curve.first_divergence_step);
  }
  if (curve.max_difference_step) {
    text += fmt::format(", largest difference {} at step {}", number(curve.curves.max_abs_difference),
                        *curve.max_difference_step);
  }
  if (curve.curves.length_a != curve.curves.length_b) {
    text += fmt::format(" (lengths {} vs {})", curve.curves.length_a, curve.curves.length_b);
  }
  return text;
}

std::vector<std::string> metric_header() {
  return {"metric", "A", "B", "delta", "rel", "better", "threshold", "status", "samples", "evidence"};
}

std::vector<std::string> metric_cells(const compare::MetricRow& row) {
  const auto& verdict = row.verdict;
  return {verdict.metric,
          number(verdict.a),
          number(verdict.b),
          number(verdict.absolute_delta),
          percent(verdict.relative_delta),
          better_text(row),
          threshold_text(row),
          std::string(compare::to_string(verdict.status)),
          samples_text(row),
          verdict.run_evidence ? run_evidence_text(*verdict.run_evidence, row.threshold)
          : row.one_trajectory ? std::string("one trajectory per side: no test (vary the seed)")
                               : evidence_text(verdict)};
}

}  // namespace expctl::report::detail
