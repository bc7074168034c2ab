// A night in-process (nightly::run_night) with a fake launcher that records runs of known speeds
// through the store API: which configurations it is asked to run with which tags, what a night
// is judged against, how a suspected regression is confirmed, and the exit codes. No LibTorch.
#include "noise.hpp"
#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/nightly/night.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
namespace fs = std::filesystem;

namespace {

/// A store, a spec and a launcher that writes a run of `speed` samples/s for each request.
struct FakeNight {
  test::TempDir dir;
  fs::path db_path = dir / "expctl.db";
  fs::path spec_file = dir.write("tiny.yaml", "name: tiny\ndata:\n  dataset: synthetic\n");
  spec::Spec spec = spec::load_spec(spec_file);
  double speed = 4000;
  std::string fail_with;              ///< the launcher's error text; empty: it records a run
  std::vector<std::string> launched;  ///< "<spec file name> <tag>" per launch
  uint64_t seed = 1;
  int offset_s = 0;
  double loss_start = 2.3;  ///< the runs' loss curve starts here (compare::testing::fixture_loss)

  nightly::NightRequest request(const std::string& date) {
    nightly::NightRequest request;
    request.date = date;
    request.open_store = [this](store::OpenMode mode) { return store::Store::open(db_path, mode); };
    request.launch = [this](const compare::SuiteConfig& config, const std::vector<std::string>& tags) {
      launched.push_back(config.spec.filename().string() + " " + tags.front());
      if (!fail_with.empty()) {
        return fail_with;
      }
      auto db = store::Store::open(db_path);
      compare::testing::Noise draw(seed++);
      compare::testing::FakeRun run;
      run.throughput = draw.samples(30, speed * (1 + 0.01 * draw.normal()), 0.01);
      for (const double rate : run.throughput) {
        run.step_time_ms.push_back(64000.0 / rate);
      }
      run.loss = compare::testing::fixture_loss(30, loss_start);
      run.start_offset_s = offset_s += 60;
      run.canonical = spec.canonical();
      run.tags = tags;
      compare::testing::write_run(db, run);
      return std::string();
    };
    return request;
  }

  /// The spec file edited (a team's script or hyperparameter changed between nights).
  void edit_spec(const std::string& text) {
    spec_file = dir.write("tiny.yaml", text);
    spec = spec::load_spec(spec_file);
  }

  compare::Suite suite(const std::string& entry_lines = "") const {
    return compare::load_suite(
        dir.write("suite.yaml", "suite: ci\nspecs:\n  - spec: tiny.yaml\n    repeat: 3\n" + entry_lines));
  }
};

}  // namespace

TEST_CASE("a first night runs each entry repeat times tagged with the night and has no baseline yet") {
  FakeNight night;
  const auto result = nightly::run_night(night.suite(), night.request("2026-12-01"));
  CHECK(night.launched == std::vector<std::string>(3, "tiny.yaml nightly:2026-12-01"));
  REQUIRE(result.cases.size() == 1);
  CHECK_FALSE(result.cases[0].comparison);
  CHECK_THAT(result.cases[0].skipped, Catch::Contains("no baseline yet (no run tagged baseline:tiny"));
  CHECK(result.exit_code == util::ExitCode::ok);
}

TEST_CASE("a slower night is rerun and fails when the reruns confirm it, and its runs are tagged failed") {
  FakeNight night;
  (void)nightly::run_night(night.suite(), night.request("2026-12-01"));
  night.launched.clear();
  night.speed = 3000;  // 25 % slower than the rolling baseline
  const auto result = nightly::run_night(night.suite("    confirm_rounds: 2\n"), night.request("2026-12-02"));
  CHECK(night.launched == std::vector<std::string>{"tiny.yaml nightly:2026-12-02", "tiny.yaml nightly:2026-12-02",
                                                   "tiny.yaml nightly:2026-12-02",
                                                   "tiny.yaml nightly-confirm:2026-12-02",
                                                   "tiny.yaml nightly-confirm:2026-12-02"});
  REQUIRE(result.cases.size() == 1);
  CHECK(result.cases[0].grade.grade == nightly::Grade::fail);
  CHECK(result.cases[0].confirmation.has_value());
  CHECK(result.exit_code == util::ExitCode::mismatch);
  const auto tonight = store::Store::open(night.db_path).list_runs({.tag = "nightly-fail:2026-12-02"});
  CHECK(tonight.size() == 3);
}

TEST_CASE("a run that cannot be launched skips its entry with the launcher's error and exits 1") {
  FakeNight night;
  (void)store::Store::open(night.db_path);  // the store exists; nothing gets recorded in it tonight
  night.fail_with = "expctl run tiny.yaml exited 1: boom";
  const auto result = nightly::run_night(night.suite(), night.request("2026-12-01"));
  CHECK(night.launched.size() == 1);  // the first failed round ends the entry's rounds
  REQUIRE(result.cases.size() == 1);
  CHECK(result.cases[0].skipped == "expctl run tiny.yaml exited 1: boom");
  CHECK(result.launch_failed);
  CHECK(result.exit_code == util::ExitCode::run_failed);
}

TEST_CASE("every entry is checked before anything runs, and a bad date is refused") {
  FakeNight night;
  CHECK_THROWS_WITH(nightly::run_night(night.suite("    baseline: {spec: tiny.yaml}\n"), night.request("2026-12-01")),
                    Catch::Contains("specs[0].baseline: the same configuration as the entry"));
  CHECK(night.launched.empty());
  CHECK_THROWS_AS(nightly::run_night(night.suite(), night.request("12/01/2026")), util::CompareError);
  CHECK(night.launched.empty());
}

TEST_CASE(
    "an entry's baseline follows it across a spec change: a script 2.3x slower after an edit fails the night, "
    "and the report says what changed") {
  FakeNight night;
  (void)nightly::run_night(night.suite(), night.request("2026-12-01"));
  (void)nightly::run_night(night.suite(), night.request("2026-12-02"));
  const std::string before = night.spec.hash();
  night.edit_spec("name: tiny\ndata:\n  dataset: synthetic\nseed: 7\n");
  REQUIRE(night.spec.hash() != before);
  night.speed = 4000 / 2.3;
  night.launched.clear();
  const auto result = nightly::run_night(night.suite("    confirm_rounds: 2\n"), night.request("2026-12-03"));
  REQUIRE(result.cases.size() == 1);
  const auto& item = result.cases[0];
  INFO(item.skipped << item.grade.line);
  REQUIRE(item.comparison.has_value());  // before entries had an identity: "no baseline yet", exit 0
  CHECK_THAT(item.baseline, Catch::Contains("nightly 2026-12-01 to 2026-12-02 (2 nights, 6 runs)"));
  CHECK(item.grade.grade == nightly::Grade::fail);
  CHECK_THAT(item.grade.line, Catch::Contains("samples_per_sec") && Catch::Contains("confirmed by 2 reruns"));
  REQUIRE_FALSE(item.changes.empty());
  CHECK_THAT(item.changes.front(), Catch::Contains("seed"));
  CHECK(result.exit_code == util::ExitCode::mismatch);
  // Tonight's runs carry the entry's identity as well as the night.
  const auto entry = store::Store::open(night.db_path).list_runs({.tag = "nightly-entry:ci/tiny.yaml"});
  CHECK(entry.size() == 3 + 3 + 3 + 2);
  const auto markdown = nightly::render_nightly_markdown("ci", result.cases, "2026-12-03");
  CHECK_THAT(markdown, Catch::Contains("Changed since the baseline:\n\n- ") && Catch::Contains("seed"));
  CHECK_THAT(nightly::render_junit("ci", result.cases, "2026-12-03T00:00:00Z"),
             Catch::Contains("<property name=\"changed\" value=\""));
}

TEST_CASE("a loss curve that changed with the spec is reported as expected, not as a correctness failure") {
  FakeNight night;
  (void)nightly::run_night(night.suite(), night.request("2026-12-01"));
  night.loss_start = 4.6;  // the same spec, a loss twice as high: a correctness regression
  const auto same_spec = nightly::run_night(night.suite(), night.request("2026-12-02"));
  REQUIRE(same_spec.cases.at(0).comparison.has_value());
  CHECK(same_spec.cases.at(0).grade.grade == nightly::Grade::fail);
  CHECK(same_spec.exit_code == util::ExitCode::mismatch);

  night.edit_spec("name: tiny\ndata:\n  dataset: synthetic\noptim:\n  lr: 0.5\n");
  night.loss_start = 9.2;  // the changed spec learns differently
  const auto changed = nightly::run_night(night.suite(), night.request("2026-12-03"));
  const auto& item = changed.cases.at(0);
  REQUIRE(item.comparison.has_value());
  INFO(item.grade.line);
  CHECK(item.grade.grade == nightly::Grade::pass);
  CHECK_THAT(item.grade.line, Catch::Contains("changed as expected (the spec changed since the baseline)"));
  const auto* loss = item.grade.find("final_train_loss");
  REQUIRE(loss != nullptr);
  CHECK_THAT(loss->reason, Catch::StartsWith("changed as expected"));
  CHECK_THAT(item.changes.front(), Catch::Contains("optim.lr"));
  CHECK(changed.exit_code == util::ExitCode::ok);
}

TEST_CASE("two entries of one spec need names of their own: an entry's identity is its name") {
  FakeNight night;
  const auto two = night.dir.write("two.yaml",
                                   "suite: ci\nspecs:\n  - spec: tiny.yaml\n  - spec: tiny.yaml\n"
                                   "    set: [seed=9]\n");
  CHECK_THROWS_WITH(compare::load_suite(two), Catch::Contains("specs[0] and specs[1] are both entry \"tiny.yaml\": "
                                                              "give each a `name:` of its own"));
  const auto named = night.dir.write("named.yaml",
                                     "suite: ci\nspecs:\n  - spec: tiny.yaml\n  - spec: tiny.yaml\n"
                                     "    name: tiny-seed9\n    set: [seed=9]\n");
  const auto suite = compare::load_suite(named);
  CHECK(suite.specs.at(0).identity == "ci/tiny.yaml");
  CHECK(suite.specs.at(1).identity == "ci/tiny-seed9");
  const auto bad = night.dir.write("bad.yaml", "suite: ci\nspecs:\n  - spec: tiny.yaml\n    name: a b\n");
  CHECK_THROWS_WITH(compare::load_suite(bad), Catch::Contains("specs[0].name: a non-empty name without spaces"));
}
