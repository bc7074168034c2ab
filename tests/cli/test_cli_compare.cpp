// `expctl compare` and `expctl baseline set` through the real binary (nightly: test_cli_nightly.cpp),
// over stores written through the store API with known distributions.
#include <fstream>
#include <sstream>
#include <tuple>

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

/// A store with a baseline, a repeat of it (1 % noise) and a 10 % slower run, none with a
/// fingerprint (so none has history).
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

  /// Writes `count` quiet repeats (about 1 % apart) at `throughput`; returns them as a group selector.
  std::string group(uint64_t seed, size_t count, double throughput, int offset_s) const {
    auto db = store::Store::open(db_path);
    compare::testing::Noise noise(seed + 500);
    std::string ids;
    for (size_t i = 0; i < count; ++i) {
      const double speed = throughput * (1 + 0.01 * noise.normal());
      const auto id = compare::testing::write_run(db, cli_run(seed + i, speed, offset_s + static_cast<int>(i))).id;
      ids += (ids.empty() ? "" : ",") + id;
    }
    return ids;
  }
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

/// Runs of one spec on one environment: seven earlier repeats (about 1 % apart), then a baseline,
/// a repeat 0.5 % off and a run 20 % slower.
struct HistoryStore {
  test::TempDir dir;
  fs::path db_path = dir / "expctl.db";
  std::string baseline;
  std::string repeat;
  std::string slower;

  HistoryStore() {
    auto db = store::Store::open(db_path);
    compare::testing::Noise noise(77);
    for (int i = 0; i < 7; ++i) {
      compare::testing::write_run(
          db, fingerprinted(10 + static_cast<uint64_t>(i), 1000.0 * (1 + 0.01 * noise.normal()), 600 * i));
    }
    baseline = compare::testing::write_run(db, fingerprinted(1, 1000.0, 7200)).id;
    repeat = compare::testing::write_run(db, fingerprinted(2, 995.0, 7800)).id;
    slower = compare::testing::write_run(db, fingerprinted(3, 800.0, 8400)).id;
  }

  static FakeRun fingerprinted(uint64_t seed, double throughput, int offset_s) {
    FakeRun run = cli_run(seed, throughput, offset_s);
    run.fingerprint = compare::testing::fixture_fingerprint();
    return run;
  }

  util::SubprocessResult expctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", db_path.string()});
    return run_expctl(args);
  }
};

}  // namespace

TEST_CASE("compare: a repeat with no history is inconclusive with exit 0 and the documented line") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.repeat});
  INFO(result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(first_line(result.out),
             Catch::StartsWith("inconclusive: samples_per_sec ") &&
                 Catch::Contains("with 1+1 runs and no earlier runs of the same spec on the same environment: the "
                                 "run-to-run noise is unknown; rerun with `expctl ab … --repeat 5`"));
  CHECK(result.out.find("Metrics") != std::string::npos);
}

TEST_CASE("compare: --fail-on-inconclusive makes an inconclusive verdict exit 3") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.slower, "--fail-on-inconclusive"});
  INFO(result.err);
  CHECK(result.exit_code == 3);
  CHECK_THAT(first_line(result.out), Catch::StartsWith("inconclusive: samples_per_sec -"));
}

TEST_CASE("compare: a 10 % slower single run is inconclusive without history however many steps it has") {
  CompareStore s;
  const auto result = s.expctl({"compare", s.baseline, s.slower, "--format", "json"});
  INFO(result.err);
  CHECK(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document.at("outcome") == "inconclusive");
  CHECK(document.at("inconclusive").at(0) == "samples_per_sec");
  CHECK(document.at("metrics").at(0).at("source") == "runs");
  CHECK(document.at("metrics").at(0).at("n_a") == 1);
}

TEST_CASE("compare: five quiet repeats a side that are 20 % slower are a regression with exit 3") {
  CompareStore s;
  const std::string a = s.group(100, 5, 1000.0, 1000);
  const std::string b = s.group(200, 5, 800.0, 2000);
  const auto result = s.expctl({"compare", a, b});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 3);
  CHECK(first_line(result.out) == "regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95");
}

TEST_CASE("compare: earlier runs of the spec on the environment decide single-run comparisons") {
  HistoryStore s;
  const auto slower = s.expctl({"compare", s.baseline, s.slower});
  INFO(slower.out << slower.err);
  CHECK(slower.exit_code == 3);
  CHECK(first_line(slower.out) == "regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95");
  CHECK_THAT(slower.out, Catch::Contains("runs n=1/1, 8 earlier"));  // the repeat started before it
  const auto repeat = s.expctl({"compare", s.baseline, s.repeat, "--format", "json"});
  INFO(repeat.out << repeat.err);
  CHECK(repeat.exit_code == 0);
  const auto document = nlohmann::json::parse(repeat.out);
  CHECK(document.at("verdict") == "no regression");
  CHECK(document.at("history").size() == 7);
  CHECK(document.at("reproducibility").at("required") == true);
  CHECK(document.at("reproducibility").at("identical") == true);
  const auto without = s.expctl({"compare", s.baseline, s.slower, "--history", "0"});
  CHECK(without.exit_code == 0);
  CHECK_THAT(first_line(without.out), Catch::StartsWith("inconclusive: "));
}

TEST_CASE("compare: no pair of eight unchanged runs 16 % apart is a regression") {
  // The runs of the report that started it all: one spec, one machine, one after another,
  // samples/s from 3581 to 4166, loss curves bitwise identical.
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const double speeds[] = {3581, 3905, 4166, 3720, 4012, 3650, 3850, 4090};
  std::vector<std::string> ids;
  {
    auto db = store::Store::open(db_path);
    for (int i = 0; i < 8; ++i) {
      ids.push_back(
          compare::testing::write_run(db, HistoryStore::fingerprinted(static_cast<uint64_t>(i + 1), speeds[i], 600 * i))
              .id);
    }
  }
  int regressions = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = i + 1; j < ids.size(); ++j) {
      const auto result = run_expctl({"--db", db_path.string(), "compare", ids[i], ids[j]});
      INFO(first_line(result.out) << result.err);
      CHECK(result.exit_code == 0);
      CHECK_THAT(first_line(result.out), Catch::StartsWith("inconclusive: ") || Catch::Equals("no regression"));
      regressions += result.exit_code == 3 ? 1 : 0;
    }
  }
  CHECK(regressions == 0);
}

TEST_CASE("compare: selectors @latest~N and prefixes work through the CLI") {
  CompareStore s;
  const auto result = s.expctl({"compare", "@latest~2", s.repeat.substr(0, 20), "--format", "json"});
  INFO(result.err);
  CHECK(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document.at("a").at("runs") == nlohmann::json::array({s.baseline}));
  CHECK(document.at("b").at("runs") == nlohmann::json::array({s.repeat}));
  CHECK(document.at("outcome") == "inconclusive");
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
  const std::string a = s.group(100, 5, 1000.0, 1000);
  const std::string b = s.group(200, 5, 900.0, 2000);
  const auto result = s.expctl({"compare", a, b, "--threshold", "samples_per_sec=-20%", "--threshold",
                                "step_time_ms_p50=+20%", "--threshold", "step_time_ms_p95=+20%"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(first_line(result.out) == "no regression");
}

TEST_CASE(
    "compare: text, markdown and html start with the verdict, json holds it, and html and markdown go to "
    "--output") {
  CompareStore s;
  const std::string a = s.group(100, 5, 1000.0, 1000);
  const std::string b = s.group(200, 5, 800.0, 2000);
  const std::string verdict = "regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95";
  const auto text = s.expctl({"compare", a, b});
  CHECK(text.exit_code == 3);
  CHECK(first_line(text.out) == verdict);
  const auto json = s.expctl({"compare", a, b, "--format", "json"});
  CHECK(json.exit_code == 3);
  CHECK(nlohmann::json::parse(json.out).at("verdict") == verdict);
  const auto markdown = s.expctl({"compare", a, b, "--format", "markdown"});
  CHECK(markdown.exit_code == 3);
  CHECK(first_line(markdown.out) == "### :x: " + verdict);

  const auto read = [](const fs::path& path) {
    std::stringstream content;
    content << std::ifstream(path).rdbuf();
    return content.str();
  };
  const fs::path html = s.dir / "report.html";
  const auto written = s.expctl({"compare", a, b, "--format", "html", "-o", html.string()});
  CHECK(written.exit_code == 3);
  CHECK(written.out.empty());
  const std::string page = read(html);
  CHECK(page.find("<svg id=\"throughput\"") != std::string::npos);
  // The first thing the page shows (its title and first heading) is the verdict.
  CHECK(page.find("<title>expctl compare: " + verdict + "</title>") != std::string::npos);
  const auto heading = page.find("<h1");
  REQUIRE(heading != std::string::npos);
  CHECK(page.find(verdict, heading) == page.find('>', heading) + 1);

  const fs::path md = s.dir / "report.md";
  const auto written_md = s.expctl({"compare", a, b, "--format", "markdown", "-o", md.string()});
  CHECK(written_md.exit_code == 3);
  CHECK(written_md.out.empty());
  CHECK(read(md) == markdown.out);
}

TEST_CASE("baseline set moves the baseline tag to the accepted run") {
  CompareStore s;
  const auto first = s.expctl({"baseline", "set", s.repeat});
  INFO(first.err);
  CHECK(first.exit_code == 0);
  const auto second = s.expctl({"baseline", "set", s.baseline});
  CHECK(second.exit_code == 0);
  CHECK_THAT(second.out, Catch::Contains("was " + s.repeat));
  CHECK_THAT(first_line(s.expctl({"compare", "tag:baseline:tiny", s.repeat}).out), Catch::StartsWith("inconclusive: "));
}

TEST_CASE("compare end to end: two real short runs of one spec are not a regression and reproduce bit for bit") {
#ifndef EXPCTL_WITH_TORCH_PROVIDER
  expctl::test::skip("torch", "this expctl is built without LibTorch (EXPCTL_WITH_TORCH=OFF), so it has no `run`");
  return;
#endif
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
  // One run a side and no earlier run: timing is inconclusive (exit 0) on any machine, however
  // loaded; training results must reproduce exactly.
  CHECK(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document.at("outcome") == "inconclusive");
  CHECK(document.at("regressions").empty());
  CHECK(document.at("spec_changes").empty());
  CHECK(document.at("environment").at("available") == true);
  CHECK(document.at("loss_curve").at("identical") == true);
  CHECK(document.at("loss_curve").at("sha256_equal") == true);
  CHECK(document.at("reproducibility").at("identical") == true);
  bool has_throughput = false;
  for (const auto& metric : document.at("metrics")) {
    INFO(metric.at("metric"));
    CHECK(metric.at("status") != "regression");
    if (metric.at("metric") == "samples_per_sec") {
      has_throughput = true;
      CHECK(metric.at("source") == "runs");
      CHECK(metric.at("status") == "inconclusive");
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
  // Two runs against one: their spread is a noise estimate with about one degree of freedom, far
  // too little to confirm a 10 % drop.
  CHECK(group.exit_code == 0);
  const auto document = nlohmann::json::parse(group.out);
  CHECK(document.at("a").at("runs").size() == 2);
  CHECK(document.at("metrics").at(0).at("n_a") == 2);
  CHECK(document.at("outcome") == "inconclusive");

  const auto incomparable = s.expctl({"compare", s.baseline, other});
  CHECK(incomparable.exit_code == 2);
  CHECK(first_line(incomparable.out) == "not comparable: different datasets (synthetic vs mnist)");
}

// Issue 41, observation 1: under strict determinism with one seed every repeat is one trajectory.
// 7+7 such runs used to get a Mann-Whitney p of 0.0004 for a difference one seed explains.
TEST_CASE("compare: 7+7 copies of one trajectory a side are one observation a side, with no p-value") {
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  std::string a;
  std::string b;
  {
    auto db = store::Store::open(db_path);
    for (int i = 0; i < 7; ++i) {
      FakeRun base = cli_run(static_cast<uint64_t>(i + 1), 1000.0, 100 * i);
      FakeRun fp16 = cli_run(static_cast<uint64_t>(i + 51), 1000.0, 100 * i + 50);
      fp16.spec["distributed"] = {{"grad_compression", "fp16"}};
      fp16.loss = compare::testing::fixture_loss(30, 2.3 * 1.008);
      a += (a.empty() ? "" : ",") + compare::testing::write_run(db, base).id;
      b += (b.empty() ? "" : ",") + compare::testing::write_run(db, fp16).id;
    }
  }
  const auto result = run_expctl({"--db", db_path.string(), "compare", a, b, "--format", "json"});
  INFO(result.out << result.err);
  const auto document = nlohmann::json::parse(result.out);
  bool found = false;
  for (const auto& metric : document.at("metrics")) {
    if (metric.at("metric") != "final_train_loss")
      continue;
    found = true;
    CHECK(metric.at("n_a") == 1);
    CHECK(metric.at("n_b") == 1);
    CHECK(metric.at("runs_a") == 7);
    CHECK(metric.at("evidence").is_null());  // no test: no p-value, no zero-width interval
    CHECK(metric.at("status") == "ok");
    CHECK_THAT(metric.at("reason").get<std::string>(),
               Catch::StartsWith("one trajectory per side (7 runs of A and 7 of B; copies of one trajectory count "
                                 "once): B's final_train_loss is +0.8% (within threshold +2%)") &&
                   Catch::Contains("vary the seed to judge it (expctl ab … --vary-seed"));
  }
  CHECK(found);
}

// Issue 41, observation 3: a p-value beside "inconclusive" said nothing of the level or the correction.
TEST_CASE("compare: every verdict line with a p-value names the test, the level and the Holm correction") {
  HistoryStore s;
  const auto result = s.expctl({"compare", s.baseline, s.slower});
  INFO(result.out << result.err);
  CHECK_THAT(result.out, Catch::Contains("samples_per_sec: -20.1% is beyond threshold -5% and the ±") &&
                             Catch::Contains("run-to-run noise band of 8 earlier runs (t-test p = ") &&
                             Catch::Contains(", Holm over 3 metrics at level 0.01)"));
  CHECK_THAT(result.out, !Catch::Contains("after Holm"));
}

// Issue 41, observation 3: an A/B answers "by how much", with its interval, not only "regression".
TEST_CASE("compare: the report says what changed by how much with its 95 % interval") {
  CompareStore s;
  const std::string a = s.group(100, 5, 1000.0, 1000);
  const std::string b = s.group(200, 5, 800.0, 2000);
  const auto result = s.expctl({"compare", a, b});
  INFO(result.out << result.err);
  std::istringstream lines(result.out);
  std::string verdict;
  std::string change;
  std::getline(lines, verdict);
  std::getline(lines, change);
  CHECK(verdict == "regression in samples_per_sec, step_time_ms_p50, step_time_ms_p95");
  CHECK(change == "  samples_per_sec: B is 19.9% slower than A (95 % CI -20.9% to -18.8%, 5+5 runs)");
}
