// How a night is graded: the rolling baseline's choice of nights, and the grades of an entry
// (pass, warn, fail; confirmation by rerun; noise-floor notes).
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/thresholds.hpp"
#include "expctl/nightly/grade.hpp"
#include "expctl/nightly/history.hpp"

using namespace expctl;
using namespace expctl::compare;
using namespace expctl::nightly;

namespace {

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
