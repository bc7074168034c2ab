// `expctl compare`, `expctl baseline set` and `expctl nightly --no-run` through the real binary,
// over stores written through the store API with known distributions.
#include <fstream>
#include <sstream>

#include "../unit/compare/noise.hpp"
#include "../unit/compare/run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"

using namespace expctl;
using compare::testing::FakeRun;
using test::run_expctl;
namespace fs = std::filesystem;

namespace {

FakeRun cli_run(uint64_t seed, double throughput, int offset_s) {
  compare::testing::Noise noise(seed);
  FakeRun run;
  run.throughput = noise.samples(30, throughput, 0.01);
  for (const double rate : run.throughput) {
    run.step_time_ms.push_back(64000.0 / rate);
  }
  run.loss = compare::testing::fixture_loss(30);
  run.eval_accuracy = 0.85;
  run.start_offset_s = offset_s;
  return run;
}

/// A store with a baseline, a repeat of it (1 % noise) and a 10 % slower run.
struct CompareStore {
  test::TempDir dir;
  fs::path db_path = dir / "expctl.db";
  std::string baseline;
  std::string repeat;
  std::string slower;

  CompareStore() {
    auto db = store::Store::open(db_path);
    baseline = compare::testing::write_run(db, cli_run(1, 1000.0, 0)).id;
    repeat = compare::testing::write_run(db, cli_run(2, 1000.0, 60)).id;
    slower = compare::testing::write_run(db, cli_run(3, 900.0, 120)).id;
  }

  util::SubprocessResult expctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", db_path.string()});
    return run_expctl(args);
  }
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

TEST_CASE("compare: a repeat of the baseline is no regression, exit 0") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.repeat});
  INFO(result.err);
  CHECK(result.exit_code == 0);
  CHECK(first_line(result.out) == "no regression");
  CHECK(result.out.find("Metrics") != std::string::npos);
}

TEST_CASE("compare: a 10 % slower run is a regression, exit 3") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.slower});
  INFO(result.err);
  CHECK(result.exit_code == 3);
  CHECK(first_line(result.out) == "regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95");
}

TEST_CASE("compare: selectors @latest~N and prefixes work through the CLI") {
  CompareStore s;
  const auto result = s.expctl({"compare", "@latest~2", s.repeat.substr(0, 20), "--format", "json"});
  INFO(result.err);
  CHECK(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document.at("a").at("runs") == nlohmann::json::array({s.baseline}));
  CHECK(document.at("b").at("runs") == nlohmann::json::array({s.repeat}));
  CHECK(document.at("verdict") == "no regression");
}

TEST_CASE("compare: an unknown run is exit 2 with a message naming the selector") {
  CompareStore s;
  const auto result = s.expctl({"compare", "nosuchrun", "x"});
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::Contains("nosuchrun"));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
}

TEST_CASE("compare: a malformed selector and a bad threshold are exit 2") {
  CompareStore s;
  const auto selector = s.expctl({"compare", "@latest~x", s.repeat});
  CHECK(selector.exit_code == 2);
  CHECK_THAT(selector.err, Catch::Contains("bad run selector '@latest~x'"));
  const auto threshold = s.expctl({"compare", s.baseline, s.repeat, "--threshold", "samples_per_sec=fast"});
  CHECK(threshold.exit_code == 2);
  CHECK_THAT(threshold.err, Catch::Contains("fast"));
}

TEST_CASE("compare: --threshold loosens a regression away") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.slower, "--threshold", "samples_per_sec=-20%", "--threshold",
                                "step_time_ms_p50=+20%", "--threshold", "step_time_ms_p95=+20%"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(first_line(result.out) == "no regression");
}

TEST_CASE("compare: every format starts with the verdict; html and markdown go to --output") {
  CompareStore s;
  const auto markdown = s.expctl({"compare", s.baseline, s.slower, "--format", "markdown"});
  CHECK(markdown.exit_code == 3);
  CHECK(first_line(markdown.out) == "### :x: regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95");
  const fs::path html = s.dir / "report.html";
  const auto written = s.expctl({"compare", s.baseline, s.slower, "--format", "html", "-o", html.string()});
  CHECK(written.exit_code == 3);
  CHECK(written.out.empty());
  std::stringstream content;
  content << std::ifstream(html).rdbuf();
  CHECK(content.str().find("<svg id=\"throughput\"") != std::string::npos);
}

TEST_CASE("baseline set moves the baseline tag to the accepted run") {
  CompareStore s;
  const auto first = s.expctl({"baseline", "set", s.repeat});
  INFO(first.err);
  CHECK(first.exit_code == 0);
  const auto second = s.expctl({"baseline", "set", s.baseline});
  CHECK(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("was " + s.repeat));
  CHECK(first_line(s.expctl({"compare", "tag:baseline:tiny", s.repeat}).out) == "no regression");
}

TEST_CASE("nightly --no-run: tonight's slower run against the spec's baseline is a JUnit failure, exit 3") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const fs::path spec_file = dir.write("tiny.yaml", "name: tiny\ndata:\n  dataset: synthetic\n");
  const spec::Spec spec = spec::load_spec(spec_file);
  {
    auto db = store::Store::open(db_path);
    FakeRun baseline = cli_run(1, 1000.0, 0);
    baseline.canonical = spec.canonical();
    baseline.tags = {"baseline:tiny"};
    compare::testing::write_run(db, baseline);
    FakeRun tonight = cli_run(3, 900.0, 3600);
    tonight.canonical = spec.canonical();
    tonight.tags = {"nightly:2026-11-30"};
    compare::testing::write_run(db, tonight);
  }
  const fs::path suite = dir.write("suite.yaml", "suite: ci\nspecs:\n  - spec: tiny.yaml\n    repeats: 1\n");
  const fs::path junit = dir / "out" / "nightly.xml";
  const fs::path summary = dir / "out" / "nightly.md";
  const auto nightly = run_expctl({"--db", db_path.string(), "nightly", suite.string(), "--no-run", "--date",
                                   "2026-11-30", "--junit", junit.string(), "--summary", summary.string()});
  INFO(nightly.out << nightly.err);
  CHECK(nightly.exit_code == 3);
  CHECK_THAT(nightly.out, Catch::Contains("tiny: regression in samples_per_sec"));
  std::stringstream xml;
  xml << std::ifstream(junit).rdbuf();
  CHECK_THAT(xml.str(), Catch::Contains("<testcase classname=\"nightly.tiny\" name=\"samples_per_sec\" time=\"0\">\n"
                                        "      <failure message=\"samples_per_sec: "));
  std::stringstream markdown;
  markdown << std::ifstream(summary).rdbuf();
  CHECK_THAT(markdown.str(), Catch::Contains("| tiny | regression in samples_per_sec"));

  // Without a run tonight the spec is skipped, not failed.
  const auto other_night = run_expctl({"--db", db_path.string(), "nightly", suite.string(), "--no-run", "--date",
                                       "2026-12-01", "--junit", junit.string(), "--summary", summary.string()});
  CHECK(other_night.exit_code == 0);
  CHECK_THAT(other_night.out, Catch::Contains("tiny: skipped: no completed run tagged nightly:2026-12-01"));
}

TEST_CASE("nightly: a bad suite file is exit 2 naming the file") {
  test::TempDir dir;
  const fs::path suite = dir.write("suite.yaml", "suite: ci\nspecs: []\n");
  const auto result = run_expctl({"--db", (dir / "expctl.db").string(), "nightly", suite.string(), "--no-run"});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Catch::Contains("suite.yaml: needs a non-empty `specs:` list"));
  const fs::path good = dir.write("good.yaml", "specs:\n  - spec: tiny.yaml\n");
  const auto date =
      run_expctl({"--db", (dir / "expctl.db").string(), "nightly", good.string(), "--no-run", "--date", "30.11.2026"});
  CHECK(date.exit_code == 2);
  CHECK_THAT(date.err, Catch::Contains("--date 30.11.2026: expected YYYY-MM-DD"));
}

TEST_CASE("compare end to end: two real short runs of one spec have identical loss curves and no spec changes") {
  test::TempDir dir;
  const std::string db = (dir / "expctl.db").string();
  const std::string spec = (test::source_dir() / "experiments" / "tiny-synthetic.yaml").string();
  for (int i = 0; i < 2; ++i) {
    const auto run = run_expctl({"--db", db, "-q", "run", spec});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
  }
  const auto result = run_expctl({"--db", db, "compare", "@latest~1", "@latest", "--format", "json"});
  INFO(result.out << result.err);
  // Timing on a shared machine may or may not cross a threshold (exit 3, checked below to be
  // timing only); everything else is exact.
  CHECK((result.exit_code == 0 || result.exit_code == 3));
  const auto document = nlohmann::json::parse(result.out);
  const std::string verdict = document.at("verdict");
  CHECK((verdict == "no regression" || verdict.starts_with("regression in ")));
  CHECK(document.at("spec_changes").empty());
  CHECK(document.at("environment").at("available") == true);
  CHECK(document.at("loss_curve").at("identical") == true);
  CHECK(document.at("loss_curve").at("sha256_equal") == true);
  bool has_throughput = false;
  for (const auto& metric : document.at("metrics")) {
    // Timing may regress on a loaded machine; results of identical training never may.
    if (metric.at("status") == "regression") {
      const std::string name = metric.at("metric");
      INFO(name);
      CHECK((name == "samples_per_sec" || name.starts_with("step_time_ms") || name == "comm_wait_fraction"));
    }
    if (metric.at("metric") == "samples_per_sec") {
      has_throughput = true;
      CHECK(metric.at("source") == "steps");
      CHECK(metric.at("n_a").get<int>() >= 5);
    }
    if (metric.at("metric") == "final_train_loss") {
      CHECK(metric.at("status") == "ok");
    }
  }
  CHECK(has_throughput);
}

TEST_CASE("compare: groups of runs and runs on another dataset through the CLI") {
  CompareStore s;
  std::string other;
  {
    auto db = store::Store::open(s.db_path);
    FakeRun mnist = cli_run(4, 1000.0, 180);
    mnist.spec["data"]["dataset"] = "mnist";
    other = compare::testing::write_run(db, mnist).id;
  }
  const auto group = s.expctl({"compare", s.baseline + "," + s.repeat, s.slower, "--format", "json"});
  INFO(group.err);
  CHECK(group.exit_code == 3);
  const auto document = nlohmann::json::parse(group.out);
  CHECK(document.at("a").at("runs").size() == 2);
  CHECK(document.at("metrics").at(0).at("n_a") == 60);

  const auto incomparable = s.expctl({"compare", s.baseline, other});
  CHECK(incomparable.exit_code == 2);
  CHECK(first_line(incomparable.out) == "not comparable: different datasets (synthetic vs mnist)");
}
