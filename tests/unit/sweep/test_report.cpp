// The report across points: configurations, replicates with their spread, best per metric.

#include <algorithm>

#include "sweep_test_helpers.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/statistics.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/util/atomic_file.hpp"

using namespace expctl;
using nlohmann::json;
using test::TempDir;

namespace {

store::RunRecord run(const std::string& id, double loss, double accuracy) {
  store::RunRecord record;
  record.id = id;
  record.status = store::RunStatus::completed;
  record.summary_json = json{{"final_train_loss", loss}, {"eval_accuracy", accuracy}, {"steps", 20}}.dump();
  return record;
}

struct Fixture {
  TempDir dir;
  sweep::Sweep sweep = sweep::load_sweep(test::sweep_test::write_sweep(dir, "name: lr\ngrid:\n  optim.lr: [0.02, 0.05]\nseeds: 2\n"));
  // Points: 0 lr .02 seed 7, 1 lr .02 seed 8, 2 lr .05 seed 7, 3 lr .05 seed 8 (no run yet).
  std::vector<std::vector<store::RunRecord>> runs{
      {run("a", 0.5, 0.70)}, {run("b", 0.6, 0.72)}, {run("c", 0.3, 0.81)}, {}};
};

}  // namespace

TEST_CASE("report: replicates over seeds form one configuration with the median and the run-to-run spread") {
  const Fixture fixture;
  const sweep::Report report = sweep::build_report(fixture.sweep, fixture.runs, {});
  CHECK(report.axes == std::vector<std::string>{"optim.lr"});
  CHECK(report.metrics == std::vector<std::string>{"final_train_loss", "eval_accuracy"});
  CHECK(report.replicates);
  REQUIRE(report.configurations.size() == 2);
  const sweep::Configuration& first = report.configurations[0];
  CHECK(first.points == std::vector<size_t>{0, 1});
  CHECK(first.runs == std::vector<std::string>{"a", "b"});
  CHECK(first.cells[0].median == Approx(0.55));
  const std::vector<std::vector<double>> groups{{0.5, 0.6}};
  CHECK(first.cells[0].spread == Approx(*compare::pooled_huber_scale(groups)));
  const sweep::Configuration& second = report.configurations[1];
  CHECK(second.runs == std::vector<std::string>{"c"});
  CHECK(second.cells[0].median == Approx(0.3));
  CHECK(std::isnan(second.cells[0].spread));  // one run: no spread
}

TEST_CASE("report: the best configuration per metric follows the metric's direction") {
  const Fixture fixture;
  const sweep::Report report = sweep::build_report(fixture.sweep, fixture.runs, {});
  REQUIRE(report.best.size() == 2);
  CHECK(report.best[0].metric == "final_train_loss");
  CHECK(report.best[0].direction == compare::Direction::lower_is_better);
  CHECK(report.best[0].configuration == 1);
  CHECK(report.best[1].metric == "eval_accuracy");
  CHECK(report.best[1].configuration == 1);
  CHECK(sweep::metric_direction("my_eval_error") == compare::Direction::lower_is_better);
  CHECK_FALSE(sweep::metric_direction("steps").has_value());
}

TEST_CASE("report: text and Markdown show the table, the best and the points without a run") {
  const Fixture fixture;
  const sweep::Report report = sweep::build_report(fixture.sweep, fixture.runs, {"final_train_loss"});
  const std::string text = sweep::render_text(report);
  CHECK_THAT(text, Catch::StartsWith("sweep lr (4 points, 3 of 4 runs completed, sweep hash " +
                                     fixture.sweep.hash.substr(0, 12) + ")\n"));
  CHECK_THAT(text, Catch::Contains("optim.lr  points  runs  final_train_loss"));
  CHECK_THAT(text, Catch::Contains("\n0.02      0,1        2    0.55 ± 0.07152\n"));
  CHECK_THAT(text, Catch::Contains("best final_train_loss (lower is better): optim.lr=0.05 (0.3)"));
  CHECK_THAT(text, Catch::Contains("no completed run yet: point(s) 3"));
  const std::string markdown = sweep::render_markdown(report);
  CHECK_THAT(markdown, Catch::Contains("| optim.lr | points | runs | final_train_loss |\n| --- | --- | ---: | ---: |"));
}

TEST_CASE("report: the JSON document") {
  const Fixture fixture;
  const json document = sweep::to_json(sweep::build_report(fixture.sweep, fixture.runs, {}));
  CHECK(document["kind"] == "sweep-report");
  CHECK(document["format_version"] == 1);
  CHECK(document["runs_expected"] == 4);
  CHECK(document["runs_completed"] == 3);
  REQUIRE(document["configurations"].size() == 2);
  CHECK(document["configurations"][0]["axes"] == json{{"optim.lr", 0.02}});
  CHECK(document["configurations"][0]["metrics"]["final_train_loss"]["n"] == 2);
  CHECK(document["configurations"][1]["metrics"]["final_train_loss"]["spread"].is_null());
  CHECK(document["points"][3]["runs"].empty());
  CHECK(document["best"]["eval_accuracy"]["axes"] == json{{"optim.lr", 0.05}});
}

TEST_CASE("report: the HTML has one plot per metric and numeric axis, with every run and each median") {
  const Fixture fixture;
  const std::string html = sweep::render_html(sweep::build_report(fixture.sweep, fixture.runs, {}));
  CHECK_THAT(html, Catch::StartsWith("<!DOCTYPE html>"));
  CHECK_THAT(html, Catch::Contains("<svg id=\"plot-final_train_loss-optim-lr\""));
  CHECK_THAT(html, Catch::Contains("<svg id=\"plot-eval_accuracy-optim-lr\""));
  size_t runs = 0;
  for (size_t at = html.find("class=\"run\""); at != std::string::npos; at = html.find("class=\"run\"", at + 1)) {
    ++runs;
  }
  CHECK(runs == 6);  // 3 runs, 2 plots
  CHECK_THAT(html, Catch::Contains("class=\"spread\""));
}

// The whole page against a golden file (its plots are checked in a browser too:
// scripts/render_html_check.sh sweep, tests/unit/report/CMakeLists.txt). After an intended change:
//   EXPCTL_UPDATE_GOLDEN=1 build/<dir>/tests/unit/sweep/test_sweep "report: the HTML page*"
TEST_CASE("report: the HTML page equals its golden file") {
  const Fixture fixture;
  const std::string html = sweep::render_html(sweep::build_report(fixture.sweep, fixture.runs, {}));
  const std::string path = test::sweep_test::data("report.html");
  if (std::getenv("EXPCTL_UPDATE_GOLDEN") != nullptr) {
    REQUIRE(util::write_file_atomic(path, html));
  }
  const auto golden = util::read_file(path);
  REQUIRE(golden);
  INFO("golden file " << path << " (EXPCTL_UPDATE_GOLDEN=1 regenerates it)");
  CHECK(html == *golden);
}
