#include <fmt/format.h>

#include "expctl/report/format.hpp"
#include "expctl/report/report.hpp"

namespace expctl::report {
namespace {

struct CaseCounts {
  size_t tests = 0;
  size_t failures = 0;
  size_t skipped = 0;
};

std::string testcase(std::string_view classname, std::string_view name, std::string_view body) {
  return fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\">{}</testcase>\n", xml_escape(classname),
                     xml_escape(name), body);
}

std::string failure(std::string_view message, std::string_view report) {
  return fmt::format("\n      <failure message=\"{}\" type=\"regression\">{}</failure>\n    ", xml_escape(message),
                     xml_escape(report));
}

std::string skipped(std::string_view message) {
  return fmt::format("<skipped message=\"{}\"/>", xml_escape(message));
}

// One metric's case: a regression fails, an inconclusive timing metric is skipped (undecided).
std::string metric_case(const std::string& classname, const compare::MetricRow& row, const std::string& report,
                        CaseCounts& counts) {
  const auto status = row.verdict.status;
  const std::string message = fmt::format("{}: {} -> {} ({}), threshold {}", row.verdict.metric,
                                          detail::number(row.verdict.a), detail::number(row.verdict.b),
                                          detail::percent(row.verdict.relative_delta), detail::threshold_text(row));
  counts.tests += 1;
  counts.failures += status == compare::Status::regression ? 1 : 0;
  counts.skipped += status == compare::Status::inconclusive ? 1 : 0;
  const std::string body = status == compare::Status::regression     ? failure(message, report)
                           : status == compare::Status::inconclusive ? skipped("inconclusive: " + row.verdict.reason)
                                                                     : "";
  return testcase(classname, row.verdict.metric, body);
}

std::string comparison_cases(const std::string& classname, const compare::Comparison& comparison, CaseCounts& counts) {
  const std::string report = render_text(comparison);
  const bool comparable = comparison.outcome != compare::Outcome::not_comparable;
  std::string body = testcase(classname, "comparable", comparable ? "" : failure(comparison.verdict_line(), report));
  counts.tests += 1;
  counts.failures += comparable ? 0 : 1;
  if (const auto& check = comparison.reproducibility; check.required) {
    body += testcase(classname, "reproducibility", check.identical ? "" : failure(check.reason, report));
    counts.tests += 1;
    counts.failures += check.identical ? 0 : 1;
  }
  for (const auto& row : comparison.metrics) {
    body += metric_case(classname, row, report, counts);
  }
  return body;
}

// One suite per spec: the "comparable" case, "reproducibility" when it is required, then one case
// per metric (or one skipped case when there is nothing to compare).
std::string suite_for(const NightlyCase& item, std::string_view timestamp, CaseCounts& counts) {
  std::string body;
  const std::string classname = "nightly." + item.spec;
  if (!item.comparison) {
    body += testcase(classname, "comparable", skipped(item.skipped));
    counts = {1, 0, 1};
  } else {
    body += comparison_cases(classname, *item.comparison, counts);
  }
  std::string properties = fmt::format(
      "    <properties>\n      <property name=\"candidate\" value=\"{}\"/>\n      <property name=\"baseline\" "
      "value=\"{}\"/>\n"
      "    </properties>\n",
      xml_escape(item.candidate), xml_escape(item.baseline));
  return fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" timestamp=\"{}\" "
      "time=\"0\">\n{}{}"
      "  </testsuite>\n",
      xml_escape(classname), counts.tests, counts.failures, counts.skipped, xml_escape(timestamp), properties, body);
}

}  // namespace

std::string render_junit(std::string_view suite, const std::vector<NightlyCase>& cases, std::string_view timestamp) {
  std::string suites;
  size_t tests = 0;
  size_t failures = 0;
  for (const auto& item : cases) {
    CaseCounts counts;
    suites += suite_for(item, timestamp, counts);
    tests += counts.tests;
    failures += counts.failures;
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\">\n{}"
      "</testsuites>\n",
      xml_escape(suite), tests, failures, suites);
}

std::string render_nightly_markdown(std::string_view suite, const std::vector<NightlyCase>& cases,
                                    std::string_view date) {
  std::string text =
      fmt::format("## Suite {}, night of {}\n\n| spec | verdict | candidate | baseline |\n| --- | --- | --- | --- |\n",
                  suite, date);
  for (const auto& item : cases) {
    const std::string verdict = item.comparison ? item.comparison->verdict_line() : "skipped: " + item.skipped;
    text += fmt::format("| {} | {} | `{}` | {} |\n", item.spec, verdict, item.candidate, item.baseline);
  }
  for (const auto& item : cases) {
    if (item.comparison) {
      text += fmt::format("\n<details><summary>{}: {}</summary>\n\n{}\n</details>\n", item.spec,
                          item.comparison->verdict_line(), render_markdown(*item.comparison));
    }
  }
  return text;
}

}  // namespace expctl::report
