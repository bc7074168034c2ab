// The nightly suite file and how a night is graded: parsing (repeat, confirm rounds, rolling K,
// A/B baselines, thresholds), the rolling baseline's choice of nights, and the grades.
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

MetricRow row(const std::string& metric, Status status, const std::string& reason = "why") {
  MetricRow result;
  result.verdict.metric = metric;
  result.verdict.status = status;
  result.verdict.reason = reason;
  result.threshold = default_threshold(*find_metric(metric));
  result.threshold_origin = "spec";
  return result;
}

Comparison comparison_of(std::vector<MetricRow> rows) {
  Comparison comparison;
  comparison.metrics = std::move(rows);
  for (const auto& item : comparison.metrics) {
    if (item.verdict.status == Status::regression) {
      comparison.regressions.push_back(item.verdict.metric);
    }
  }
  comparison.outcome = comparison.regressions.empty() ? Outcome::no_regression : Outcome::regression;
  return comparison;
}

store::RunRecord night_run(const std::string& id, const std::string& night, bool failed = false) {
  store::RunRecord run;
  run.id = id;
  run.status = store::RunStatus::completed;
  run.tags = {std::string(k_night_tag) + night};
  if (failed) {
    run.tags.push_back(std::string(k_failed_tag) + night);
  }
  return run;
}

std::vector<std::string> ids_of(const std::vector<store::RunRecord>& runs) {
  std::vector<std::string> ids;
  for (const auto& run : runs) {
    ids.push_back(run.id);
  }
  return ids;
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
             Catch::Contains("specs[0]: unknown key 'threshold' (known: spec, set,"));
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

TEST_CASE("the rolling baseline takes the last K nights before tonight and leaves out failed nights") {
  const std::vector<store::RunRecord> runs = {
      night_run("t1", "2026-12-05"),    night_run("f1", "2026-12-04", true), night_run("d1", "2026-12-03"),
      night_run("d2", "2026-12-03"),    night_run("c1", "2026-12-02"),       night_run("b1", "2026-12-01"),
      night_run("later", "2026-12-06"),
  };
  CHECK(ids_of(rolling_baseline(runs, "2026-12-05", 2)) == std::vector<std::string>{"d1", "d2", "c1"});
  CHECK(ids_of(rolling_baseline(runs, "2026-12-05", 1)) == std::vector<std::string>{"d1", "d2"});
  CHECK(ids_of(rolling_baseline(runs, "2026-12-05", 10)) == std::vector<std::string>{"d1", "d2", "c1", "b1"});
  CHECK(rolling_baseline(runs, "2026-12-01", 5).empty());
  std::vector<store::RunRecord> with_failed_run = runs;
  with_failed_run[2].status = store::RunStatus::failed;
  CHECK(ids_of(rolling_baseline(with_failed_run, "2026-12-05", 1)) == std::vector<std::string>{"d2"});
  CHECK(nights_of(runs).front() == "2026-12-06");
  CHECK(ids_of(runs_of_night(runs, k_night_tag, "2026-12-03")) == std::vector<std::string>{"d1", "d2"});
}

TEST_CASE("an unchanged night passes") {
  const Comparison first = comparison_of({row("samples_per_sec", Status::ok), row("final_train_loss", Status::ok)});
  const EntryGrade grade = grade_entry(first, nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(grade.grade == Grade::pass);
  CHECK(grade.line == "pass: no regression");
  CHECK(grade.find("samples_per_sec")->grade == Grade::pass);
}

TEST_CASE("a timing regression confirmed by the reruns fails") {
  const Comparison first =
      comparison_of({row("samples_per_sec", Status::regression), row("eval_accuracy", Status::ok)});
  CHECK(needs_confirmation(first));
  const Comparison reruns = comparison_of({row("samples_per_sec", Status::regression, "-30% is beyond")});
  const EntryGrade grade = grade_entry(first, nullptr, {3, &reruns, "", "3 reruns against the same baseline"});
  CHECK(grade.grade == Grade::fail);
  CHECK(grade.confirmed == std::vector<std::string>{"samples_per_sec"});
  CHECK(grade.line == "fail: regression in samples_per_sec confirmed by 3 reruns against the same baseline");
  CHECK(grade.find("samples_per_sec")->reason == "confirmed by 3 reruns against the same baseline: -30% is beyond");
}

TEST_CASE("a timing regression the reruns do not show again is a warn") {
  const Comparison first = comparison_of({row("samples_per_sec", Status::regression, "-12% is beyond")});
  const Comparison reruns = comparison_of({row("samples_per_sec", Status::ok, "-0.4% is within")});
  const EntryGrade grade = grade_entry(first, nullptr, {3, &reruns, "", "3 reruns"});
  CHECK(grade.grade == Grade::warn);
  CHECK(grade.confirmed.empty());
  CHECK(grade.line == "warn: samples_per_sec: -12% is beyond; not confirmed by 3 reruns (ok: -0.4% is within)");
}

TEST_CASE("a suspected timing regression without reruns is a warn, and fails at once with confirm_rounds 0") {
  const Comparison first = comparison_of({row("step_time_ms_p50", Status::regression, "+9% is beyond")});
  const EntryGrade unconfirmed = grade_entry(first, nullptr, {3, nullptr, "--no-run launches none", "3 reruns"});
  CHECK(unconfirmed.grade == Grade::warn);
  CHECK_THAT(unconfirmed.line, Catch::EndsWith("not confirmed: --no-run launches none"));
  const EntryGrade immediate = grade_entry(first, nullptr, {0, nullptr, "", "0 reruns"});
  CHECK(immediate.grade == Grade::fail);
  CHECK(immediate.line == "fail: regression in step_time_ms_p50 (confirm_rounds: 0)");
}

TEST_CASE("a correctness regression fails without rerun and its timing regressions stay unconfirmed") {
  Comparison first = comparison_of({row("samples_per_sec", Status::regression), row("final_train_loss", Status::ok)});
  first.reproducibility.required = true;
  first.reproducibility.identical = false;
  first.regressions.insert(first.regressions.begin(), "reproducibility");
  CHECK(correctness_failed(first));
  CHECK_FALSE(needs_confirmation(first));
  const EntryGrade grade = grade_entry(first, nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(grade.grade == Grade::fail);
  CHECK_THAT(grade.line, Catch::EndsWith("(correctness fails without rerun)"));
  CHECK(grade.find("samples_per_sec")->grade == Grade::warn);

  const Comparison loss = comparison_of({row("final_train_loss", Status::regression, "worse beyond threshold +2%")});
  CHECK_FALSE(needs_confirmation(loss));
  const EntryGrade loss_grade = grade_entry(loss, nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(loss_grade.grade == Grade::fail);
  CHECK(loss_grade.find("final_train_loss")->reason == "worse beyond threshold +2%");
}

TEST_CASE("inconclusive metrics and changes between the warn and fail thresholds are warns") {
  const Comparison inconclusive = comparison_of({row("samples_per_sec", Status::inconclusive, "-6% is inside")});
  const EntryGrade grade = grade_entry(inconclusive, nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(grade.grade == Grade::warn);
  CHECK(grade.line == "warn: samples_per_sec: inconclusive: -6% is inside");

  const Comparison first = comparison_of({row("samples_per_sec", Status::ok)});
  MetricRow warned = row("samples_per_sec", Status::regression, "-4.2% is beyond threshold -3%");
  warned.threshold = pct(3, ThresholdSign::minus);
  const Comparison warn_view = comparison_of({warned});
  const EntryGrade band = grade_entry(first, &warn_view, {3, nullptr, "", "3 reruns"});
  CHECK(band.grade == Grade::warn);
  CHECK(band.find("samples_per_sec")->reason ==
        "beyond warn threshold -3% (fails beyond -5%): -4.2% is beyond threshold -3%");
}

TEST_CASE("runs that cannot be compared fail the entry") {
  Comparison first;
  first.outcome = Outcome::not_comparable;
  first.not_comparable = {"different datasets"};
  const EntryGrade grade = grade_entry(first, nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(grade.grade == Grade::fail);
  CHECK_THAT(grade.line, Catch::StartsWith("fail: not comparable"));
}

TEST_CASE("a threshold below its measured noise floor is a note naming the metric and where to change it") {
  MetricRow noisy = row("samples_per_sec", Status::inconclusive);
  noisy.verdict.run_evidence = RunLevelEvidence{};
  noisy.verdict.run_evidence->noise = NoiseEstimate{0.08, 4.5, 6, 1};
  MetricRow quiet = row("step_time_ms_p50", Status::ok);
  quiet.verdict.run_evidence = RunLevelEvidence{};
  quiet.verdict.run_evidence->noise = NoiseEstimate{0.01, 4.5, 6, 1};
  const auto notes = noise_floor_notes(comparison_of({noisy, quiet}));
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].metric == "samples_per_sec");
  CHECK_THAT(notes[0].text, Catch::StartsWith("threshold -5% of samples_per_sec is below its run-to-run noise of ±8.3% "
                                              "(6 runs)"));
  CHECK_THAT(notes[0].text, Catch::Contains("the entry's `thresholds:` or `repeat:`"));
  const EntryGrade grade = grade_entry(comparison_of({noisy, quiet}), nullptr, {3, nullptr, "", "3 reruns"});
  CHECK(grade.notes.size() == 1);
}

TEST_CASE("thresholds the suite gave are labelled as the suite's") {
  Comparison comparison = comparison_of({row("samples_per_sec", Status::ok), row("eval_loss", Status::ok)});
  comparison.metrics[0].threshold_origin = "--threshold";
  label_suite_thresholds(comparison);
  CHECK(comparison.metrics[0].threshold_origin == "suite");
  CHECK(comparison.metrics[1].threshold_origin == "spec");
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
