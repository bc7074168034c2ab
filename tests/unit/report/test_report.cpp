// Every rendering of one deterministic comparison against its golden file, plus the properties
// each format promises (verdict first, self-contained HTML, well-formed JUnit XML: the nightly
// module's renderings of graded entries of the same comparison).
// Regenerate the golden files after an intended change: EXPCTL_UPDATE_GOLDEN=1 test_report
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "noise.hpp"
#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/nightly/report.hpp"
#include "expctl/report/report.hpp"
#include "expctl/util/subprocess.hpp"

namespace expctl::report {
namespace {

using compare::RunData;
using nightly::NightlyCase;
using nightly::render_junit;
using nightly::render_nightly_markdown;

RunData fake_run(const std::string& id, uint64_t seed, double throughput, const std::string& kernel) {
  compare::testing::Noise noise(seed);
  RunData run;
  run.record.id = id;
  run.record.name = "tiny";
  run.record.spec_hash = std::string(64, id.back());
  run.record.status = store::RunStatus::completed;
  run.record.started_at = "2026-11-29T00:00:00.000Z";
  run.spec = compare::testing::fixture_spec();
  run.fingerprint = compare::testing::fixture_fingerprint(kernel);
  run.samples["samples_per_sec"] = noise.samples(30, throughput, 0.01);
  for (const double rate : run.samples["samples_per_sec"]) {
    run.samples["step_time_ms"].push_back(64000.0 / rate);
  }
  run.loss = compare::testing::fixture_loss(30);
  for (std::int64_t step = 1; step <= 30; ++step) {
    run.loss_steps.push_back(step);
  }
  run.summary = {{"final_train_loss", run.loss.back()},
                 {"eval_accuracy", 0.85},
                 {"samples_per_sec", compare::testing::fixture_median(run.samples["samples_per_sec"])},
                 {"loss_curve_sha256", compare::testing::fixture_curve_sha256(run.loss)}};
  return run;
}

// Seven earlier runs of A's configuration whose speeds differ by about 1 % from run to run.
std::vector<RunData> golden_history() {
  compare::testing::Noise noise(99);
  std::vector<RunData> history;
  for (int i = 0; i < 7; ++i) {
    RunData run = fake_run(fmt::format("20261128-0{}0000-hhhhh{}", i, i), 10 + static_cast<uint64_t>(i),
                           1000.0 * (1 + 0.01 * noise.normal()), "6.1.0-18-amd64");
    run.record.spec_hash = std::string(64, 'a');
    history.push_back(std::move(run));
  }
  return history;
}

// A: baseline. B: 10 % slower, lr changed, another kernel, a loss curve that drifts from step 12;
// seven earlier runs of A's configuration tell the run-to-run noise (about 1 %).
compare::Comparison golden_comparison() {
  RunData a = fake_run("20261129-000000-aaaaaa", 1, 1000.0, "6.1.0-18-amd64");
  RunData b = fake_run("20261129-010000-bbbbbb", 2, 900.0, "6.1.0-21-amd64");
  b.record.started_at = "2026-11-29T01:00:00.000Z";
  b.spec["optim"]["lr"] = 0.1;
  for (size_t i = 11; i < b.loss.size(); ++i) {
    b.loss[i] += 0.001 * static_cast<double>(i - 10);
  }
  b.summary["final_train_loss"] = b.loss.back();
  b.summary["loss_curve_sha256"] = compare::testing::fixture_curve_sha256(b.loss);
  b.summary["eval_accuracy"] = 0.8475;
  return compare::compare_runs({a}, {b}, {}, golden_history());
}

// One run a side of one spec on one environment, 6.5 % apart, against earlier runs with 5 % noise.
compare::Comparison inconclusive_comparison() {
  RunData a = fake_run("20261129-000000-aaaaaa", 1, 4000.0, "6.1.0-18-amd64");
  RunData b = fake_run("20261129-010000-bbbbbb", 2, 3728.0, "6.1.0-18-amd64");
  b.record.spec_hash = a.record.spec_hash;
  b.record.started_at = "2026-11-29T01:00:00.000Z";
  std::vector<RunData> history;
  const double speeds[] = {4000, 3700, 4150, 3850, 4300, 3900, 4050};
  for (int i = 0; i < 7; ++i) {
    history.push_back(fake_run(fmt::format("20261128-0{}0000-hhhhh{}", i, i), 20 + static_cast<uint64_t>(i), speeds[i],
                               "6.1.0-18-amd64"));
    history.back().record.spec_hash = a.record.spec_hash;
  }
  return compare::compare_runs({a}, {b}, {}, history);
}

std::filesystem::path golden_path(const std::string& name) {
  return test::source_dir() / "tests/data/compare" / name;
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void check_golden(const std::string& name, const std::string& rendered) {
  const auto path = golden_path(name);
  if (std::getenv("EXPCTL_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << rendered;
  }
  INFO("golden file " << path.string() << " (EXPCTL_UPDATE_GOLDEN=1 regenerates it)");
  CHECK(rendered == read(path));
}

// The golden comparison without its correctness regression: a timing regression alone.
compare::Comparison timing_only(compare::Comparison comparison) {
  for (auto& row : comparison.metrics) {
    if (row.verdict.metric == "final_train_loss") {
      row.verdict.status = compare::Status::ok;
      row.verdict.reason = "within threshold +2%";
    }
  }
  std::erase(comparison.regressions, "final_train_loss");
  return comparison;
}

NightlyCase graded(const std::string& spec, const compare::Comparison& first,
                   const std::optional<compare::Comparison>& reruns) {
  NightlyCase item;
  item.spec = spec;
  item.comparison = first;
  item.candidate = "20261129-010000-bbbbbb";
  item.baseline = "tag baseline:" + spec;
  item.confirmation = reruns;
  item.confirmation_runs = reruns ? "candidate 20261129-030000-dddddd" : "";
  item.grade = nightly::grade_entry(*item.comparison, nullptr,
                                    {3, item.confirmation ? &*item.confirmation : nullptr, "", "3 reruns"});
  return item;
}

// Four entries, one of each grade: a confirmed timing regression (fail), one the reruns did not
// show again (warn), an inconclusive entry whose threshold is below its noise (warn, note), and
// a first night (skipped).
std::vector<NightlyCase> nightly_cases() {
  const auto slower = timing_only(golden_comparison());
  NightlyCase fresh;
  fresh.spec = "cnn";
  fresh.skipped = "no baseline yet (no run tagged baseline:cnn and no earlier nightly)";
  fresh.candidate = "20261129-020000-cccccc";
  return {graded("tiny", slower, slower), graded("flaky", slower, inconclusive_comparison()),
          graded("noisy", inconclusive_comparison(), std::nullopt), fresh};
}

TEST_CASE("text report matches its golden file and starts with the verdict") {
  const auto text = render_text(golden_comparison());
  CHECK(text.starts_with("regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95, final_train_loss\n"));
  check_golden("report.txt", text);
}

TEST_CASE("text report of an inconclusive comparison matches its golden file and says why in its first line") {
  const auto comparison = inconclusive_comparison();
  CHECK(comparison.outcome == compare::Outcome::inconclusive);
  const auto text = render_text(comparison);
  CHECK(text.starts_with("inconclusive: samples_per_sec -6.5% is inside the ±"));
  check_golden("report-inconclusive.txt", text);
}

TEST_CASE("text report is coloured only when asked") {
  const auto comparison = golden_comparison();
  CHECK(render_text(comparison).find('\x1b') == std::string::npos);
  CHECK(render_text(comparison, {.color = true}).starts_with("\x1b[1;31mregression in"));
}

TEST_CASE("json report matches its golden file and is versioned") {
  const auto document = to_json(golden_comparison());
  CHECK(document.at("format_version") == k_json_version);
  CHECK(document.at("kind") == "compare");
  CHECK(document.at("outcome") == "regression");
  CHECK(document.at("exit_code") == 3);
  check_golden("report.json", document.dump(2) + "\n");
}

TEST_CASE("markdown report matches its golden file") {
  const auto markdown = render_markdown(golden_comparison());
  CHECK(markdown.starts_with("### :x: regression in samples_per_sec"));
  check_golden("report.md", markdown);
}

// Whether `needle` occurs in `markdown` other than right after a backslash (escaped).
bool unescaped(const std::string& markdown, const std::string& needle) {
  for (auto at = markdown.find(needle); at != std::string::npos; at = markdown.find(needle, at + 1)) {
    if (at == 0 || markdown[at - 1] != '\\') {
      return true;
    }
  }
  return false;
}

TEST_CASE("markdown report: hostile run names, spec values and metric names stay text in their cell and line") {
  RunData a = fake_run("20261129-000000-aaaaaa", 1, 1000.0, "6.1.0-18-amd64");
  RunData b = fake_run("20261129-010000-bbbbbb", 2, 900.0, "6.1.0-18-amd64");
  b.record.name = "x](https://evil.example) <img src=x> | cell\n### heading";
  b.spec["optim"]["lr"] = "![t](https://evil.example/t.png)|\n- item";
  const auto markdown = render_markdown(compare::compare_runs({a}, {b}, {}, {}));
  // Markup characters appear only backslash-escaped.
  CHECK_FALSE(unescaped(markdown, "](https://evil.example)"));
  CHECK_FALSE(unescaped(markdown, "[t]"));
  CHECK_FALSE(unescaped(markdown, "<img"));
  CHECK(markdown.find("\n### heading") == std::string::npos);
  CHECK(markdown.find("\n- item") == std::string::npos);
  CHECK_THAT(markdown, Catch::Contains("x\\](https://evil.example) \\<img src=x\\> \\| cell ### heading"));
  // Every row of a table has as many unescaped bars as its header: no value opened a cell.
  std::istringstream lines(markdown);
  std::string line;
  std::optional<std::size_t> header_bars;
  int tables = 0;
  while (std::getline(lines, line)) {
    if (!line.starts_with("|")) {
      header_bars.reset();
      continue;
    }
    std::size_t bars = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\') ? 1 : 0;
    }
    if (!header_bars) {
      header_bars = bars;
      ++tables;
    }
    INFO(line);
    CHECK(bars == *header_bars);
  }
  CHECK(tables >= 3);  // metrics, runs, spec differences
}

TEST_CASE("nightly markdown summary: an entry's name stays text in its row, its list items and its <summary>") {
  const auto slower = timing_only(golden_comparison());
  const auto markdown =
      render_nightly_markdown("nightly", {graded("<img src=x>](u)\n| y", slower, std::nullopt)}, "2026-11-29");
  CHECK_FALSE(unescaped(markdown, "<img"));
  CHECK(markdown.find("\n| y") == std::string::npos);
  CHECK_THAT(markdown, Catch::Contains("| \\<img src=x\\>\\](u) \\| y | :warning: warn |"));
  CHECK_THAT(markdown, Catch::Contains("- \\<img src=x\\>\\](u) \\| y samples_per_sec: **warn**"));
  CHECK_THAT(markdown, Catch::Contains("<details><summary>&lt;img src=x&gt;](u) | y: warn: "));
}

TEST_CASE("html report matches its golden file and is self-contained with both plots") {
  const auto html = render_html(golden_comparison());
  CHECK(html.find("<svg id=\"loss-curves\"") != std::string::npos);
  CHECK(html.find("<svg id=\"throughput\"") != std::string::npos);
  CHECK(html.find("class=\"curve-a\"") != std::string::npos);
  CHECK(html.find("class=\"curve-b\"") != std::string::npos);
  CHECK(html.find("class=\"bar-b\"") != std::string::npos);
  CHECK(html.find("host.kernel") != std::string::npos);
  CHECK(html.find("optim.lr") != std::string::npos);
  // Nothing is fetched: no scripts, no external stylesheets or images.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  check_golden("report.html", html);
}

TEST_CASE("junit xml matches its golden file: a fail is a failure, a warn a skipped case that says warn") {
  const auto xml = render_junit("nightly", nightly_cases(), "2026-11-29T00:00:00Z");
  CHECK_THAT(xml, Catch::Contains("<testsuites name=\"nightly\" tests=\"19\" failures=\"3\" skipped=\"7\">"));
  CHECK_THAT(xml, Catch::Contains("<testcase classname=\"nightly.tiny\" name=\"samples_per_sec\" time=\"0\">\n"
                                  "      <failure message=\"samples_per_sec: 999.959 -&gt; 902.692 (-9.73%), threshold "
                                  "-5% (default): confirmed by 3 reruns: "));
  CHECK_THAT(xml, Catch::Contains("Confirmation (candidate 20261129-030000-dddddd)"));
  CHECK_THAT(xml, Catch::Contains("<testcase classname=\"nightly.flaky\" name=\"samples_per_sec\" time=\"0\">\n"
                                  "      <skipped message=\"warn: -9.7% is beyond threshold -5%"));
  CHECK_THAT(xml, Catch::Contains("not confirmed by 3 reruns (inconclusive: "));
  CHECK_THAT(xml, Catch::Contains("<property name=\"grade\" value=\"warn\"/>"));
  CHECK_THAT(xml, Catch::Contains("<property name=\"note\" value=\"threshold -5% of samples_per_sec is below its "
                                  "run-to-run noise"));
  CHECK_THAT(xml, Catch::Contains("<system-out>samples_per_sec: 3999.84 -&gt; 3739.15 (-6.52%), threshold -5% "
                                  "(default)\nnote: threshold -5% of samples_per_sec is below"));
  CHECK_THAT(xml, Catch::Contains("<skipped message=\"no baseline yet"));
  check_golden("nightly.xml", xml);
}

TEST_CASE("junit xml is well-formed XML") {
  test::TempDir dir;
  const auto file = dir.write("nightly.xml", render_junit("nightly <&>", nightly_cases(), "2026-11-29T00:00:00Z"));
  const auto result = util::run_capture({"python3", "-c",
                                         "import sys, xml.dom.minidom; d = xml.dom.minidom.parse(sys.argv[1]); "
                                         "print(len(d.getElementsByTagName('testcase')), "
                                         "len(d.getElementsByTagName('failure')), "
                                         "len(d.getElementsByTagName('skipped')))",
                                         file.string()});
  REQUIRE(result);
  INFO(result->err);
  CHECK(result->exit_code == 0);
  CHECK(result->out == "19 3 7\n");
}

TEST_CASE("nightly markdown summary matches its golden file with each entry's grade") {
  const auto markdown = render_nightly_markdown("nightly", nightly_cases(), "2026-11-29");
  CHECK_THAT(markdown, Catch::StartsWith("## Suite nightly, night of 2026-11-29: 1 fail, 2 warn, 0 pass, 1 skipped\n"));
  CHECK_THAT(markdown, Catch::Contains("| tiny | :x: **fail** | regression in samples_per_sec, step_time_ms_p50, "
                                       "step_time_ms_p95 confirmed by 3 reruns |"));
  CHECK_THAT(markdown, Catch::Contains("| flaky | :warning: warn | samples_per_sec: -9.7% is beyond threshold -5%"));
  CHECK_THAT(markdown,
             Catch::Contains("- noisy: note: threshold -5% of samples_per_sec is below its run-to-run noise"));
  CHECK_THAT(markdown, Catch::Contains("#### Confirmation: candidate 20261129-030000-dddddd"));
  check_golden("nightly.md", markdown);
}

TEST_CASE("formats parse by name") {
  CHECK(parse_format("html") == Format::html);
  CHECK(parse_format("markdown") == Format::markdown);
  CHECK_FALSE(parse_format("pdf"));
}

TEST_CASE("xml escaping covers markup characters") {
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
}

TEST_CASE("html and json reports show each rank's phases and the straggler timeline of both sides") {
  auto comparison = golden_comparison();
  compare::RankPhases rank0{0, 60, 3.0, {0.01, 0.20, 0.45, 0.25, 0.08}, 0.01, 1.0, 1.1};
  compare::RankPhases rank1{1, 60, 3.1, {0.01, 0.22, 0.47, 0.21, 0.08}, 0.01, 1.05, 1.6};
  comparison.phases_a = {rank0, rank1};
  comparison.phases_b = {rank0};
  comparison.straggler_a = {{1, 2, 3, 4}, {1.0, 1.2, 1.6, 1.1}};
  comparison.straggler_b = {{1, 2, 3, 4}, {1.0, 1.0, 1.05, 1.0}};
  const auto html = render_html(comparison);
  CHECK(html.find("<svg id=\"phases\"") != std::string::npos);
  CHECK(html.find("<svg id=\"straggler\"") != std::string::npos);
  std::size_t bars = 0;
  for (auto at = html.find("class=\"phase-"); at != std::string::npos; at = html.find("class=\"phase-", at + 1)) {
    ++bars;
  }
  CHECK(bars == 3 * 6);  // three rank bars of six phases
  CHECK(html.find("<title>A rank 1: backward 47.0% of 3.100 ms</title>") != std::string::npos);
  const auto straggler = html.substr(html.find("<svg id=\"straggler\""));
  CHECK(straggler.find("class=\"curve-a\"") != std::string::npos);
  CHECK(straggler.find("class=\"curve-b\"") != std::string::npos);
  const auto document = to_json(comparison);
  REQUIRE(document.at("phases").at("a").size() == 2);
  CHECK(document.at("phases").at("a")[1].at("shares").at("backward") == 0.47);
  CHECK(document.at("phases").at("a")[1].at("straggler_max") == 1.6);
  CHECK(document.at("phases").at("b").size() == 1);
}

}  // namespace
}  // namespace expctl::report

