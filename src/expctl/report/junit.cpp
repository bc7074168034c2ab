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

// One suite per spec: the "comparable" case, then one case per metric (or one skipped case).
std::string suite_for(const NightlyCase& item, std::string_view timestamp) {
  std::string body;
  CaseCounts counts;
  const std::string classname = "nightly." + item.spec;
  if (!item.comparison) {
    body += testcase(classname, "comparable", fmt::format("<skipped message=\"{}\"/>", xml_escape(item.skipped)));
    counts = {1, 0, 1};
  } else {
    const auto& comparison = *item.comparison;
    const std::string report = render_text(comparison);
    const bool comparable = comparison.outcome != compare::Outcome::not_comparable;
    body += testcase(classname, "comparable", comparable ? "" : failure(comparison.verdict_line(), report));
    counts.tests += 1;
    counts.failures += comparable ? 0 : 1;
    for (const auto& row : comparison.metrics) {
      const bool failed = row.verdict.status == compare::Status::regression;
      const std::string message = fmt::format("{}: {} -> {} ({}), threshold {}", row.verdict.metric,
                                              detail::number(row.verdict.a), detail::number(row.verdict.b),
                                              detail::percent(row.verdict.relative_delta), row.threshold.to_string());
      body += testcase(classname, row.verdict.metric, failed ? failure(message, report) : "");
      counts.tests += 1;
      counts.failures += failed ? 1 : 0;
    }
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
    suites += suite_for(item, timestamp);
    if (!item.comparison) {
      tests += 1;
      continue;
    }
    tests += 1 + item.comparison->metrics.size();
    failures += item.comparison->outcome == compare::Outcome::not_comparable ? 1 : 0;
    failures += item.comparison->regressions.size();
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
