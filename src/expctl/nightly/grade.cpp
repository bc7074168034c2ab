#include "expctl/nightly/grade.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "expctl/compare/thresholds.hpp"

namespace expctl::nightly {

using compare::Comparison;
using compare::find_metric;
using compare::MetricInfo;
using compare::MetricRow;
using compare::Outcome;
using compare::Status;
using compare::threshold_below_noise;

namespace {

bool is_timing(std::string_view metric) {
  const MetricInfo* info = find_metric(metric);
  return info != nullptr && info->timing;
}

const MetricRow* row_of(const Comparison& comparison, std::string_view metric) {
  for (const auto& row : comparison.metrics) {
    if (row.verdict.metric == metric) {
      return &row;
    }
  }
  return nullptr;
}

std::string status_reason(const MetricRow* row) {
  return row == nullptr ? std::string("no value in the reruns")
                        : fmt::format("{}: {}", to_string(row->verdict.status), row->verdict.reason);
}

// A timing regression of the first comparison: fails only once the reruns show it again.
MetricGrade suspected(const MetricRow& row, const Comparison& first, const Confirmation& confirmation,
                      bool spec_changed) {
  const std::string& name = row.verdict.metric;
  const std::string& reason = row.verdict.reason;
  if (correctness_failed(first, spec_changed)) {
    return {name, Grade::warn, reason + "; not rerun: the night already fails on a correctness check"};
  }
  if (confirmation.rounds == 0) {
    return {name, Grade::fail, reason + " (confirm_rounds: 0: failed without rerun)"};
  }
  if (confirmation.comparison == nullptr) {
    return {name, Grade::warn, fmt::format("{}; not confirmed: {}", reason, confirmation.missing)};
  }
  const MetricRow* again = row_of(*confirmation.comparison, name);
  if (again != nullptr && again->verdict.status == Status::regression) {
    return {name, Grade::fail, fmt::format("confirmed by {}: {}", confirmation.label, again->verdict.reason)};
  }
  return {name, Grade::warn,
          fmt::format("{}; not confirmed by {} ({})", reason, confirmation.label, status_reason(again))};
}

// A metric within its fail threshold may still be beyond its warn threshold.
MetricGrade warn_band(const MetricRow& row, const Comparison* warn_view) {
  const MetricRow* warned = warn_view == nullptr ? nullptr : row_of(*warn_view, row.verdict.metric);
  if (warned == nullptr || warned->verdict.status != Status::regression) {
    return {row.verdict.metric, Grade::pass, ""};
  }
  return {row.verdict.metric, Grade::warn,
          fmt::format("beyond warn threshold {} (fails beyond {}): {}", warned->threshold.to_string(),
                      row.threshold.to_string(), warned->verdict.reason)};
}

MetricGrade grade_row(const MetricRow& row, const Comparison& first, const Comparison* warn_view,
                      const Confirmation& confirmation, bool spec_changed) {
  switch (row.verdict.status) {
    case Status::regression:
      if (is_timing(row.verdict.metric)) {
        return suspected(row, first, confirmation, spec_changed);
      }
      if (spec_changed) {
        return {row.verdict.metric, Grade::pass,
                "changed as expected, the spec changed since the baseline: " + row.verdict.reason, true};
      }
      return {row.verdict.metric, Grade::fail, row.verdict.reason};
    case Status::inconclusive:
      return {row.verdict.metric, Grade::warn, "inconclusive: " + row.verdict.reason};
    default:
      return warn_band(row, warn_view);
  }
}

Grade worst(const EntryGrade& grade) {
  Grade result = Grade::pass;
  for (const auto& metric : grade.metrics) {
    result = std::max(result, metric.grade);
  }
  return result;
}

std::vector<std::string> names_graded(const EntryGrade& grade, Grade wanted) {
  std::vector<std::string> names;
  for (const auto& metric : grade.metrics) {
    if (metric.grade == wanted) {
      names.push_back(metric.metric);
    }
  }
  return names;
}

std::string fail_line(const EntryGrade& grade, const Comparison& first, const Confirmation& confirmation,
                      bool spec_changed) {
  if (correctness_failed(first, spec_changed)) {
    return fmt::format("fail: {} (correctness fails without rerun)", first.verdict_line());
  }
  if (const MetricGrade* reruns = grade.find("confirmation"); reruns != nullptr && grade.confirmed.empty()) {
    return "fail: " + reruns->reason;
  }
  if (!grade.confirmed.empty()) {
    return fmt::format("fail: regression in {} confirmed by {}", fmt::join(grade.confirmed, ", "), confirmation.label);
  }
  const auto failed = names_graded(grade, Grade::fail);
  return fmt::format("fail: regression in {}{}", fmt::join(failed, ", "),
                     confirmation.rounds == 0 ? " (confirm_rounds: 0)" : "");
}

std::string warn_line(const EntryGrade& grade) {
  const auto warned = names_graded(grade, Grade::warn);
  const MetricGrade* first = grade.find(warned.front());
  std::string line = fmt::format("warn: {}: {}", first->metric, first->reason);
  if (warned.size() > 1) {
    line += fmt::format(" (also {})", fmt::join(warned.begin() + 1, warned.end(), ", "));
  }
  return line;
}

// A pass names the correctness metrics that changed with the spec, as what was asked for.
std::string pass_line(const EntryGrade& grade, const Comparison& first) {
  std::vector<std::string> changed;
  for (const auto& metric : grade.metrics) {
    if (metric.expected_change) {
      changed.push_back(metric.metric);
    }
  }
  return changed.empty() ? "pass: " + first.verdict_line()
                         : fmt::format("pass: {} changed as expected (the spec changed since the baseline)",
                                       fmt::join(changed, ", "));
}

// The reruns may fail a correctness check of their own (a rerun that does not reproduce).
void grade_reruns(EntryGrade& grade, const Confirmation& confirmation, bool spec_changed) {
  if (confirmation.comparison != nullptr && correctness_failed(*confirmation.comparison, spec_changed)) {
    grade.metrics.push_back({"confirmation", Grade::fail,
                             fmt::format("the {}: {}", confirmation.label, confirmation.comparison->verdict_line())});
  }
}

}  // namespace

std::string_view to_string(Grade grade) {
  switch (grade) {
    case Grade::pass:
      return "pass";
    case Grade::warn:
      return "warn";
    case Grade::fail:
      return "fail";
  }
  return "pass";
}

const MetricGrade* EntryGrade::find(std::string_view metric) const {
  const auto found =
      std::find_if(metrics.begin(), metrics.end(), [&](const MetricGrade& item) { return item.metric == metric; });
  return found == metrics.end() ? nullptr : &*found;
}

std::vector<std::string> timing_regressions(const Comparison& comparison) {
  std::vector<std::string> names;
  for (const auto& row : comparison.metrics) {
    if (row.verdict.status == Status::regression && is_timing(row.verdict.metric)) {
      names.push_back(row.verdict.metric);
    }
  }
  return names;
}

bool correctness_failed(const Comparison& comparison, bool spec_changed) {
  return !comparison.reproducibility.identical ||
         (!spec_changed && std::any_of(comparison.metrics.begin(), comparison.metrics.end(), [](const MetricRow& row) {
           return row.verdict.status == Status::regression && !is_timing(row.verdict.metric);
         }));
}

bool needs_confirmation(const Comparison& first, bool spec_changed) {
  return first.outcome == Outcome::regression && !correctness_failed(first, spec_changed) &&
         !timing_regressions(first).empty();
}

std::vector<NoiseNote> noise_floor_notes(const Comparison& comparison) {
  std::vector<NoiseNote> notes;
  for (const auto& row : comparison.metrics) {
    if (!row.verdict.run_evidence) {
      continue;
    }
    if (auto line = threshold_below_noise(row.verdict.metric, row.threshold, row.verdict.run_evidence->noise)) {
      notes.push_back({row.verdict.metric, *line + " (in the suite: the entry's `thresholds:` or `repeat:`)"});
    }
  }
  return notes;
}

EntryGrade grade_entry(const Comparison& first, const Comparison* warn_view, const Confirmation& confirmation,
                       bool spec_changed) {
  EntryGrade grade;
  grade.notes = noise_floor_notes(first);
  if (first.outcome == Outcome::not_comparable) {
    grade.grade = Grade::fail;
    grade.line = "fail: " + first.verdict_line();
    return grade;
  }
  for (const auto& row : first.metrics) {
    grade.metrics.push_back(grade_row(row, first, warn_view, confirmation, spec_changed));
    if (grade.metrics.back().grade == Grade::fail && is_timing(row.verdict.metric) && confirmation.rounds > 0) {
      grade.confirmed.push_back(row.verdict.metric);
    }
  }
  grade_reruns(grade, confirmation, spec_changed);
  grade.grade = first.reproducibility.identical ? worst(grade) : Grade::fail;
  grade.line = grade.grade == Grade::fail   ? fail_line(grade, first, confirmation, spec_changed)
               : grade.grade == Grade::warn ? warn_line(grade)
                                            : pass_line(grade, first);
  return grade;
}

void label_suite_thresholds(Comparison& comparison) {
  for (auto& row : comparison.metrics) {
    if (row.threshold_origin == "--threshold") {
      row.threshold_origin = "suite";
    }
  }
}

}  // namespace expctl::nightly
