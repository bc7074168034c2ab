// The nightly's renderings: JUnit XML for CI and the Markdown summary for people.
//
// JUnit has three outcomes: passed, failed (or errored) and skipped. A warn is rendered as a
// skipped case whose message and text start with "warn: ", never as a passing case with a note:
// Jenkins' JUnit plugin, GitLab's test report and GitHub's JUnit report actions all show skipped
// cases as such, none shows a passing case's output in its summary (GitLab shows <system-out> of
// failed cases only), and none fails a build on a skipped case. docs/nightly.md, "Reports".
#include "expctl/nightly/report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "expctl/report/format.hpp"
#include "expctl/report/report.hpp"
#include "expctl/util/markdown.hpp"

namespace expctl::nightly {
namespace {

using report::xml_escape;

struct CaseCounts {
  size_t tests = 0;
  size_t failures = 0;
  size_t skipped = 0;

  void add(Grade grade) {
    tests += 1;
    failures += grade == Grade::fail ? 1 : 0;
    skipped += grade == Grade::warn ? 1 : 0;
  }
};

std::string testcase(std::string_view classname, std::string_view name, std::string_view body) {
  return fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\">{}{}</testcase>\n", xml_escape(classname),
                     xml_escape(name), body, body.empty() ? "" : "\n    ");
}

std::string failure(std::string_view message, std::string_view report) {
  return fmt::format("\n      <failure message=\"{}\" type=\"regression\">{}</failure>", xml_escape(message),
                     xml_escape(report));
}

// GitLab reads a skip's reason from the element's text, Jenkins and GitHub's actions from its message.
std::string skipped(std::string_view message) {
  return fmt::format("\n      <skipped message=\"{0}\">{0}</skipped>", xml_escape(message));
}

std::string system_out(std::string_view text) {
  return text.empty() ? "" : fmt::format("\n      <system-out>{}</system-out>", xml_escape(text));
}

std::string notes_of(const EntryGrade& grade, std::string_view metric) {
  std::string text;
  for (const auto& note : grade.notes) {
    if (note.metric == metric) {
      text += (text.empty() ? "note: " : "\nnote: ") + note.text;
    }
  }
  return text;
}

// The failure's text: the night's full report, then the reruns' when they ran.
std::string failure_report(const NightlyCase& item) {
  std::string text = report::render_text(*item.comparison);
  if (item.confirmation) {
    text += fmt::format("\nConfirmation ({})\n{}", item.confirmation_runs, report::render_text(*item.confirmation));
  }
  return text;
}

std::string metric_message(const compare::MetricRow& row) {
  return fmt::format("{}: {} -> {} ({}), threshold {} ({})", row.verdict.metric, report::detail::number(row.verdict.a),
                     report::detail::number(row.verdict.b), report::detail::percent(row.verdict.relative_delta),
                     report::detail::threshold_text(row), row.threshold_origin);
}

// One metric's case, as graded: fail a <failure>, warn a <skipped> "warn: ...", pass empty.
std::string metric_case(const std::string& classname, const NightlyCase& item, const compare::MetricRow& row,
                        CaseCounts& counts) {
  const MetricGrade* grade = item.grade.find(row.verdict.metric);
  const Grade level = grade == nullptr ? Grade::pass : grade->grade;
  const std::string notes = notes_of(item.grade, row.verdict.metric);
  counts.add(level);
  if (level == Grade::fail) {
    return testcase(classname, row.verdict.metric,
                    failure(metric_message(row) + ": " + grade->reason, failure_report(item)) + system_out(notes));
  }
  if (level == Grade::warn) {
    const std::string out = metric_message(row) + (notes.empty() ? "" : "\n" + notes);
    return testcase(classname, row.verdict.metric, skipped("warn: " + grade->reason) + system_out(out));
  }
  return testcase(classname, row.verdict.metric, system_out(notes));
}

bool is_row(const compare::Comparison& comparison, std::string_view metric) {
  for (const auto& row : comparison.metrics) {
    if (row.verdict.metric == metric) {
      return true;
    }
  }
  return false;
}

// Grades that are not a metric row (the reruns' own correctness check).
std::string extra_cases(const std::string& classname, const NightlyCase& item, CaseCounts& counts) {
  std::string body;
  for (const auto& grade : item.grade.metrics) {
    if (!is_row(*item.comparison, grade.metric)) {
      counts.add(grade.grade);
      body += testcase(classname, grade.metric,
                       grade.grade == Grade::fail   ? failure(grade.reason, failure_report(item))
                       : grade.grade == Grade::warn ? skipped("warn: " + grade.reason)
                                                    : "");
    }
  }
  return body;
}

std::string check_cases(const std::string& classname, const NightlyCase& item, CaseCounts& counts) {
  const compare::Comparison& comparison = *item.comparison;
  const bool comparable = comparison.outcome != compare::Outcome::not_comparable;
  std::string body = testcase(classname, "comparable",
                              comparable ? "" : failure(comparison.verdict_line(), report::render_text(comparison)));
  counts.add(comparable ? Grade::pass : Grade::fail);
  if (const auto& check = comparison.reproducibility; check.required) {
    body += testcase(classname, "reproducibility", check.identical ? "" : failure(check.reason, failure_report(item)));
    counts.add(check.identical ? Grade::pass : Grade::fail);
  }
  return body;
}

std::string comparison_cases(const std::string& classname, const NightlyCase& item, CaseCounts& counts) {
  std::string body = check_cases(classname, item, counts);
  for (const auto& row : item.comparison->metrics) {
    body += metric_case(classname, item, row, counts);
  }
  return body + extra_cases(classname, item, counts);
}

std::string property(std::string_view name, std::string_view value) {
  return fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", xml_escape(name), xml_escape(value));
}

std::string properties(const NightlyCase& item) {
  std::string text = property("candidate", item.candidate) + property("baseline", item.baseline);
  if (item.comparison) {
    text += property("grade", to_string(item.grade.grade)) + property("verdict", item.grade.line);
  }
  if (!item.confirmation_runs.empty()) {
    text += property("confirmation", item.confirmation_runs);
  }
  for (const auto& change : item.changes) {
    text += property("changed", change);
  }
  for (const auto& note : item.grade.notes) {
    text += property("note", note.text);
  }
  return "    <properties>\n" + text + "    </properties>\n";
}

// One suite per entry: the checks, one case per metric (or one skipped case when there is
// nothing to compare).
std::string suite_for(const NightlyCase& item, std::string_view timestamp, CaseCounts& counts) {
  const std::string classname = "nightly." + item.spec;
  std::string body;
  if (!item.comparison) {
    body = testcase(classname, "comparable", skipped(item.skipped));
    counts = {1, 0, 1};
  } else {
    body = comparison_cases(classname, item, counts);
  }
  return fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" timestamp=\"{}\" "
      "time=\"0\">\n{}{}"
      "  </testsuite>\n",
      xml_escape(classname), counts.tests, counts.failures, counts.skipped, xml_escape(timestamp), properties(item),
      body);
}

// ---------------------------------------------------------------------------------------------
// Markdown.

struct GradeCounts {
  size_t pass = 0;
  size_t warn = 0;
  size_t fail = 0;
  size_t skipped = 0;
};

GradeCounts count_grades(const std::vector<NightlyCase>& cases) {
  GradeCounts counts;
  for (const auto& item : cases) {
    const Grade grade = item.grade.grade;
    counts.skipped += item.comparison ? 0 : 1;
    counts.pass += item.comparison && grade == Grade::pass ? 1 : 0;
    counts.warn += item.comparison && grade == Grade::warn ? 1 : 0;
    counts.fail += item.comparison && grade == Grade::fail ? 1 : 0;
  }
  return counts;
}

std::string grade_cell(const NightlyCase& item) {
  if (!item.comparison) {
    return "skipped";
  }
  switch (item.grade.grade) {
    case Grade::fail:
      return ":x: **fail**";
    case Grade::warn:
      return ":warning: warn";
    case Grade::pass:
      return ":white_check_mark: pass";
  }
  return "pass";
}

// The verdict without its "fail: " / "warn: " / "pass: " prefix (the grade column says it).
std::string verdict_cell(const NightlyCase& item) {
  if (!item.comparison) {
    return item.skipped;
  }
  const std::string& line = item.grade.line;
  const size_t colon = line.find(": ");
  return colon == std::string::npos ? line : line.substr(colon + 2);
}

std::string warnings_section(const std::vector<NightlyCase>& cases) {
  std::string text;
  for (const auto& item : cases) {
    for (const auto& grade : item.grade.metrics) {
      if (grade.grade != Grade::pass) {
        text += fmt::format("- {} {}: **{}**: {}\n", util::md_text(item.spec), util::md_text(grade.metric),
                            to_string(grade.grade), util::md_text(grade.reason));
      }
    }
    for (const auto& note : item.grade.notes) {
      text += fmt::format("- {}: note: {}\n", util::md_text(item.spec), util::md_text(note.text));
    }
  }
  return text.empty() ? "" : "\n### Failures, warnings and notes\n\n" + text;
}

// A <summary> line is HTML, where Markdown's backslash escapes do not apply: entities, one line.
std::string summary_text(std::string_view text) {
  std::string line(text);
  std::replace_if(
      line.begin(), line.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return report::xml_escape(line);
}

std::string details(const NightlyCase& item) {
  std::string changed;
  for (const auto& change : item.changes) {
    changed += "- " + util::md_text(change) + "\n";
  }
  std::string text = fmt::format("\n<details><summary>{}: {}</summary>\n\n{}{}\n", summary_text(item.spec),
                                 summary_text(item.grade.line),
                                 changed.empty() ? "" : "Changed since the baseline:\n\n" + changed + "\n",
                                 report::render_markdown(*item.comparison));
  if (item.confirmation) {
    text += fmt::format("\n#### Confirmation: {}\n\n{}\n", util::md_text(item.confirmation_runs),
                        report::render_markdown(*item.confirmation));
  }
  return text + "</details>\n";
}

}  // namespace

std::string render_junit(std::string_view suite, const std::vector<NightlyCase>& cases, std::string_view timestamp) {
  std::string suites;
  CaseCounts total;
  for (const auto& item : cases) {
    CaseCounts counts;
    suites += suite_for(item, timestamp, counts);
    total.tests += counts.tests;
    total.failures += counts.failures;
    total.skipped += counts.skipped;
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" "
      "skipped=\"{}\">\n{}</testsuites>\n",
      xml_escape(suite), total.tests, total.failures, total.skipped, suites);
}

std::string render_nightly_markdown(std::string_view suite, const std::vector<NightlyCase>& cases,
                                    std::string_view date) {
  const GradeCounts counts = count_grades(cases);
  std::string text = fmt::format(
      "## Suite {}, night of {}: {} fail, {} warn, {} pass, {} skipped\n\n"
      "| entry | grade | verdict | candidate | baseline |\n| --- | --- | --- | --- | --- |\n",
      util::md_text(suite), util::md_text(date), counts.fail, counts.warn, counts.pass, counts.skipped);
  for (const auto& item : cases) {
    text += fmt::format("| {} | {} | {} | {} | {} |\n", util::md_text(item.spec), grade_cell(item),
                        util::md_text(verdict_cell(item)), util::md_code(item.candidate), util::md_text(item.baseline));
  }
  text += warnings_section(cases);
  for (const auto& item : cases) {
    if (item.comparison) {
      text += details(item);
    }
  }
  return text;
}

}  // namespace expctl::nightly
