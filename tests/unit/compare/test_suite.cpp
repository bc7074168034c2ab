// The nightly suite file: parsing (repeat, confirm rounds, rolling K, A/B baselines, thresholds)
// and the thresholds it gives. How a night is graded: tests/unit/nightly/test_grade.cpp.
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/suite.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using namespace expctl::compare;

namespace {

std::string load_error(const std::string& text) {
  test::TempDir dir;
  const auto file = dir.write("suite.yaml", text);
  try {
    (void)load_suite(file);
  } catch (const util::CompareError& error) {
    return error.what();
  }
  return "";
}

Threshold pct(double amount, ThresholdSign sign) {
  return {ThresholdUnit::percent, sign, amount};
}

}  // namespace

TEST_CASE("a suite entry reads repeat, confirm rounds, rolling K, an A/B baseline and thresholds") {
  test::TempDir dir;
  const auto file = dir.write("suite.yaml",
                              "suite: ci\nrepeat: 2\nconfirm_rounds: 4\nbaseline_nights: 7\nspecs:\n"
                              "  - spec: a.yaml\n"
                              "  - spec: b.yaml\n    repeat: 5\n    confirm_rounds: 0\n    baseline_nights: 3\n"
                              "    set: [train.max_steps=40]\n"
                              "    baseline: {spec: base.yaml, set: ['model.hidden_sizes=[32]']}\n"
                              "    thresholds: {samples_per_sec: -10%, eval_accuracy: -1pp}\n"
                              "    warn: {samples_per_sec: -4%}\n"
                              "  - spec: c.yaml\n    repeats: 3\n");
  const Suite suite = load_suite(file);
  CHECK(suite.name == "ci");
  REQUIRE(suite.specs.size() == 3);
  const SuiteEntry& plain = suite.specs[0];
  CHECK(plain.spec == dir / "a.yaml");
  CHECK(plain.repeats == 2);  // the suite's defaults
  CHECK(plain.confirm_rounds == 4);
  CHECK(plain.baseline_nights == 7);
  CHECK_FALSE(plain.baseline);
  const SuiteEntry& ab = suite.specs[1];
  CHECK(ab.repeats == 5);
  CHECK(ab.confirm_rounds == 0);
  CHECK(ab.baseline_nights == 3);
  CHECK(ab.overrides == std::vector<std::string>{"train.max_steps=40"});
  REQUIRE(ab.baseline);
  CHECK(ab.baseline->spec == dir / "base.yaml");
  CHECK(ab.baseline->overrides == std::vector<std::string>{"model.hidden_sizes=[32]"});
  REQUIRE(ab.thresholds.size() == 2);
  CHECK(ab.thresholds[0].metric == "samples_per_sec");
  CHECK(ab.thresholds[0].threshold == pct(10, ThresholdSign::minus));
  CHECK(ab.thresholds[1].threshold.unit == ThresholdUnit::percentage_points);
  REQUIRE(ab.warn.size() == 1);
  CHECK(ab.warn[0].threshold == pct(4, ThresholdSign::minus));
  CHECK(suite.specs[2].repeats == 3);  // the older spelling
}

TEST_CASE("a suite entry without settings gets the documented defaults") {
  test::TempDir dir;
  const Suite suite = load_suite(dir.write("nightly.yaml", "specs:\n  - spec: a.yaml\n"));
  CHECK(suite.name == "nightly");
  CHECK(suite.specs[0].repeats == 1);
  CHECK(suite.specs[0].confirm_rounds == 3);
  CHECK(suite.specs[0].baseline_nights == 5);
  CHECK(suite.specs[0].thresholds.empty());
}

TEST_CASE("suite errors are one line naming the entry, the key and the fix") {
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    repeat: 0\n"),
             Catch::Contains("specs[0].repeat must be a whole number from 1 to 100"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    confirm_rounds: many\n"),
             Catch::Contains("specs[0].confirm_rounds must be a whole number from 0 to 20"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    baseline_nights: 0\n"),
             Catch::Contains("specs[0].baseline_nights must be a whole number from 1 to 60"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    repeat: 2\n    repeats: 2\n"),
             Catch::Contains("give `repeat` or its older spelling `repeats`, not both"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    threshold: {samples_per_sec: -5%}\n"),
             Catch::Contains("specs[0]: unknown key 'threshold' (known: spec, name, set,"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    thresholds: {speed: -5%}\n"),
             Catch::Contains("specs[0].thresholds.speed: unknown metric (known: samples_per_sec"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    thresholds: {samples_per_sec: +5%}\n"),
             Catch::Contains("specs[0].thresholds.samples_per_sec: threshold \"+5%\" for \"samples_per_sec\" points "
                             "the wrong way"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    thresholds: {samples_per_sec: -5%}\n"
                        "    warn: {samples_per_sec: -8%}\n"),
             Catch::Contains("specs[0].warn.samples_per_sec: -8% must be inside its fail threshold -5%"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    baseline: {set: [seed=2]}\n"),
             Catch::Contains("specs[0].baseline needs `spec: FILE`"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\nthreshold: -5%\n"), Catch::Contains("unknown key 'threshold'"));
  CHECK(load_error("specs:\n  - spec: a.yaml\nthreshold: -5%\n").find('\n') == std::string::npos);
}

TEST_CASE("a warn threshold must be inside the fail threshold the spec or the default gives") {
  SuiteEntry entry;
  entry.where = "suite.yaml: specs[0]";
  entry.warn = {{"samples_per_sec", pct(6, ThresholdSign::minus)}};
  const nlohmann::json spec = {{"regression", {{"samples_per_sec", "-10%"}}}};
  CHECK_NOTHROW(check_warn_thresholds(entry, spec));
  CHECK(fail_threshold(entry, *find_metric("samples_per_sec"), spec) == pct(10, ThresholdSign::minus));
  CHECK_THROWS_WITH(check_warn_thresholds(entry, nlohmann::json::object()),
                    Catch::Contains("specs[0].warn.samples_per_sec: -6% must be inside its fail threshold -5%"));
  entry.thresholds = {{"samples_per_sec", pct(8, ThresholdSign::minus)}};  // the suite's wins over the spec's
  CHECK(fail_threshold(entry, *find_metric("samples_per_sec"), spec) == pct(8, ThresholdSign::minus));
}

TEST_CASE("a list or mapping used as a key is a one-line suite error - not an escaped yaml-cpp exception") {
  // Found by fuzz_suite (fuzz/regressions/suite/): yaml-cpp's "bad conversion" escaped load_suite.
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    ? [x]\n    : 1\n"),
             Catch::Contains("specs[0]: a key must be a plain name, not a list or a mapping"));
  CHECK_THAT(load_error("specs:\n  - spec: a.yaml\n    thresholds: {[a]: -5%}\n"),
             Catch::Contains("specs[0].thresholds: a key must be a plain name"));
  CHECK_THAT(load_error("[a]: 1\nspecs:\n  - spec: a.yaml\n"),
             Catch::Contains("a key must be a plain name, not a list or a mapping"));
  CHECK_THAT(load_error("# " + std::string(1024 * 1024, 'x') + "\nspecs:\n  - spec: a.yaml\n"),
             Catch::Contains("bytes, more than the 1 MiB limit"));
}
