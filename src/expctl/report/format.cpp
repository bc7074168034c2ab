#include "expctl/report/format.hpp"

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

std::string evidence_text(const compare::Verdict& verdict) {
  if (!verdict.evidence) {
    return verdict.reason;
  }
  const auto& evidence = *verdict.evidence;
  std::string text = fmt::format("{} p={:.3g} (Holm {:.3g})", compare::to_string(evidence.decided_by), evidence.p_value,
                                 evidence.adjusted_p);
  if (evidence.ratio) {
    text += fmt::format(", ratio {:.3f} [{:.3f}, {:.3f}]", evidence.ratio->estimate, evidence.ratio->low,
                        evidence.ratio->high);
  }
  return text;
}

std::string samples_text(const compare::MetricRow& row) {
  return row.source == compare::MetricSource::value
             ? ""
             : fmt::format("{} n={}/{}", compare::to_string(row.source), row.n_a, row.n_b);
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
          row.threshold.to_string(),
          std::string(compare::to_string(verdict.status)),
          samples_text(row),
          evidence_text(verdict)};
}

}  // namespace expctl::report::detail
