#include "expctl/compare/comparison.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "expctl/compare/replicates.hpp"
#include "expctl/compare/reproducibility.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::compare {

using nlohmann::json;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
// Formats a ratio's distance from 1 as a percentage.
const Threshold k_percent{ThresholdUnit::percent, ThresholdSign::none, 0};

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (const auto& item : items) {
    text += (text.empty() ? "" : std::string(separator)) + item;
  }
  return text;
}

}  // namespace

std::string_view to_string(MetricSource source) {
  switch (source) {
    case MetricSource::value:
      return "value";
    case MetricSource::step_samples:
      return "steps";
    case MetricSource::run_values:
      return "runs";
  }
  return "value";
}

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::no_regression:
      return "no_regression";
    case Outcome::regression:
      return "regression";
    case Outcome::not_comparable:
      return "not_comparable";
    case Outcome::inconclusive:
      return "inconclusive";
  }
  return "no_regression";
}

namespace {

std::string regression_line(const Comparison& comparison) {
  std::vector<std::string> parts;
  std::vector<std::string> metrics;
  for (const auto& name : comparison.regressions) {
    if (name != "reproducibility")
      metrics.push_back(name);
  }
  if (!comparison.reproducibility.identical) {
    const std::string& reason = comparison.reproducibility.reason;
    parts.push_back(reason.substr(0, reason.find(" (run ")));
  }
  if (!metrics.empty()) {
    parts.push_back("regression in " + join(metrics, ", "));
  }
  return join(parts, "; ");
}

std::string inconclusive_line(const Comparison& comparison) {
  const auto& names = comparison.inconclusive;
  for (const auto& row : comparison.metrics) {
    if (!names.empty() && row.verdict.metric == names.front()) {
      const std::vector<std::string> others(names.begin() + 1, names.end());
      const std::string also = others.empty() ? "" : fmt::format(" (also {})", join(others, ", "));
      return fmt::format("inconclusive: {} {}{}", row.verdict.metric, row.verdict.reason, also);
    }
  }
  return "inconclusive";
}

}  // namespace

std::string Comparison::verdict_line() const {
  switch (outcome) {
    case Outcome::not_comparable:
      return "not comparable: " + join(not_comparable, "; ");
    case Outcome::regression:
      return regression_line(*this);
    case Outcome::inconclusive:
      return inconclusive_line(*this);
    case Outcome::no_regression:
      return "no regression";
  }
  return "no regression";
}

int exit_code(Outcome outcome) {
  return exit_code(outcome, false);
}

int exit_code(Outcome outcome, bool fail_on_inconclusive) {
  switch (outcome) {
    case Outcome::no_regression:
      return static_cast<int>(util::ExitCode::ok);
    case Outcome::inconclusive:
      return static_cast<int>(fail_on_inconclusive ? util::ExitCode::mismatch : util::ExitCode::ok);
    case Outcome::regression:
      return static_cast<int>(util::ExitCode::mismatch);
    case Outcome::not_comparable:
      return static_cast<int>(util::ExitCode::usage);
  }
  return static_cast<int>(util::ExitCode::run_failed);
}

namespace {

SideInfo side_info(const std::vector<RunData>& side) {
  SideInfo info;
  for (const auto& run : side) {
    info.run_ids.push_back(run.record.id);
  }
  info.name = side.front().record.name;
  info.spec_hash = side.front().record.spec_hash;
  info.started_at = side.front().record.started_at;
  return info;
}

bool is_ignored(const std::string& path, const std::vector<std::string>& ignore) {
  return std::any_of(ignore.begin(), ignore.end(), [&](const std::string& key) {
    return path == key || (path.size() > key.size() && path.starts_with(key) && path[key.size()] == '.');
  });
}

// A program run's spec holds no trainer setting (spec::applicable_values): held against a
// built-in run, only what both hold is compared.
bool both_hold(const RunData& a, const RunData& b, std::string_view path) {
  return spec::applies(a.spec, path) && spec::applies(b.spec, path);
}

std::vector<spec::SpecChange> spec_changes(const RunData& a, const RunData& b, const std::vector<std::string>& ignore) {
  std::vector<spec::SpecChange> changes;
  for (auto& change : spec::diff_values(a.spec, b.spec)) {
    if (!is_ignored(change.path, ignore) && both_hold(a, b, change.path)) {
      changes.push_back(std::move(change));
    }
  }
  if (a.env_profile != b.env_profile && !is_ignored("env", ignore)) {
    changes.push_back({"env (profile content)", a.env_profile, b.env_profile, true});
  }
  return changes;
}

json at_path(const json& tree, std::string_view dotted) {
  const json* node = &tree;
  size_t start = 0;
  while (start <= dotted.size()) {
    const size_t dot = dotted.find('.', start);
    const std::string key(dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start));
    if (!node->is_object() || !node->contains(key)) {
      return nullptr;
    }
    node = &node->at(key);
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  return *node;
}

// Reasons the numbers of A and B must not be held against each other at all.
std::vector<std::string> incomparable_reasons(const std::vector<RunData>& a, const std::vector<RunData>& b) {
  std::vector<std::string> reasons;
  const json dataset_a = at_path(a.front().spec, "data.dataset");
  const json dataset_b = at_path(b.front().spec, "data.dataset");
  if (both_hold(a.front(), b.front(), "data.dataset") && dataset_a != dataset_b) {
    reasons.push_back(fmt::format("different datasets ({} vs {})",
                                  dataset_a.is_string() ? dataset_a.get<std::string>() : "unset",
                                  dataset_b.is_string() ? dataset_b.get<std::string>() : "unset"));
  }
  if (a.front().env_profile != b.front().env_profile) {
    reasons.push_back("pinned-stack mismatch (the specs pin different environment profiles)");
  }
  for (const auto* side : {&a, &b}) {
    for (const auto& run : *side) {
      if (run.record.status != store::RunStatus::completed) {
        reasons.push_back(fmt::format("run {} is {}", run.record.id, store::to_string(run.record.status)));
      }
      const json drift = run.summary.value(util::summary_key::drift, json());
      if (drift.is_array() && !drift.empty()) {
        std::string fields;
        for (const auto& row : drift) {
          fields += (fields.empty() ? "" : ", ") + row.value("field", std::string("?"));
        }
        reasons.push_back(fmt::format("pinned-stack mismatch (run {} drifted: {})", run.record.id, fields));
      }
    }
  }
  return reasons;
}

struct ChosenThreshold {
  Threshold threshold;
  std::string origin;
};

ChosenThreshold threshold_for(const MetricInfo& info, const json& spec_values, const CompareOptions& options) {
  ChosenThreshold chosen{default_threshold(info), "default"};
  const json written = at_path(spec_values, fmt::format("regression.{}", info.name));
  if (written.is_string()) {
    chosen = {parse_threshold(written.get<std::string>()), "spec"};
  } else if (written.is_number()) {
    chosen = {threshold_from_number(written.get<double>()), "spec"};
  }
  for (const auto& override_ : options.thresholds) {
    if (override_.metric == info.name) {
      chosen = {override_.threshold, "--threshold"};
    }
  }
  check_threshold_direction(info.name, chosen.threshold, info.direction);
  return chosen;
}

void check_override_names(const CompareOptions& options) {
  for (const auto& override_ : options.thresholds) {
    if (find_metric(override_.metric) == nullptr) {
      std::string known;
      for (const auto& metric : k_metrics) {
        known += (known.empty() ? "" : ", ") + std::string(metric.name);
      }
      throw util::CompareError(
          fmt::format("--threshold {}: unknown metric '{}' (known: {})", override_.metric, override_.metric, known));
    }
  }
}

double summary_value(const RunData& run, std::string_view name) {
  const json value = run.summary.value(std::string(name), json());
  return value.is_number() ? value.get<double>() : k_nan;
}

std::vector<double> pooled(const std::vector<RunData>& side, const std::string& series) {
  std::vector<double> values;
  for (const auto& run : side) {
    if (const auto found = run.samples.find(series); found != run.samples.end()) {
      values.insert(values.end(), found->second.begin(), found->second.end());
    }
  }
  return values;
}

bool present(const std::vector<RunData>& side, std::string_view name) {
  return std::any_of(side.begin(), side.end(), [&](const RunData& run) {
    const auto found = run.summary.find(std::string(name));
    return found != run.summary.end() && !found->is_null();
  });
}

std::vector<double> timing_values(const std::vector<RunData>& side, const MetricInfo& info) {
  std::vector<double> values;
  for (const auto& run : side) {
    values.push_back(run_value(run, info));
  }
  return values;
}

size_t finite_count(const std::vector<double>& values) {
  return static_cast<size_t>(std::count_if(values.begin(), values.end(), [](double v) { return std::isfinite(v); }));
}

bool same_bits(double x, double y) {
  return std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(y);
}

// A correctness metric under strict reproducibility: every run bit for bit equal to A's first.
Verdict judge_exact(const MetricInfo& info, const MetricRow& row, const std::vector<RunData>& a,
                    const std::vector<RunData>& b) {
  const double base = summary_value(a.front(), info.name);
  double other = summary_value(b.front(), info.name);
  std::string differing;
  for (const auto* side : {&a, &b}) {
    for (const auto& run : *side) {
      if (differing.empty() && !same_bits(summary_value(run, info.name), base)) {
        other = summary_value(run, info.name);
        differing = run.record.id;
      }
    }
  }
  Verdict verdict = judge_values(info.name, base, other, row.threshold, info.direction);
  verdict.threshold_crossed = !differing.empty();
  verdict.status = differing.empty() ? Status::ok : Status::regression;
  verdict.reason = differing.empty()
                       ? "bitwise equal (same spec and environment, determinism strict)"
                       : fmt::format(
                             "run {} differs bitwise under strict determinism (same spec and environment): "
                             "reproducibility regression",
                             differing);
  return verdict;
}

// A change of B against A in the threshold's terms: a fraction of |A| for percent thresholds.
double change_in_terms(const Verdict& verdict, const Threshold& threshold) {
  if (threshold.is_relative()) {
    return verdict.relative_delta.value_or(k_nan);
  }
  return verdict.absolute_delta;
}

// One trajectory per side: the difference is a fact about one seed, judged against the threshold
// as one value a side always was, but with no p-value, and said to be what it is.
Verdict judge_one_trajectory(const MetricInfo& info, const MetricRow& row, double a, double b) {
  Verdict verdict = judge_values(info.name, a, b, row.threshold, info.direction);
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return verdict;
  }
  const std::string copies =
      row.runs_a > 1 || row.runs_b > 1
          ? fmt::format(" ({} run{} of A and {} of B; copies of one trajectory count once)", row.runs_a,
                        row.runs_a == 1 ? "" : "s", row.runs_b)
          : "";
  const std::string change = same_bits(a, b) ? std::string("equal to A's")
                                             : change_text(change_in_terms(verdict, row.threshold), row.threshold);
  const std::string_view against = verdict.status == Status::regression    ? "worse beyond"
                                   : verdict.status == Status::improvement ? "better beyond"
                                                                           : "within";
  verdict.reason = fmt::format(
      "one trajectory per side{}: B's {} is {} ({} threshold {}); one seed is no sample, so there is no p-value: "
      "vary the seed to judge it (expctl ab … --vary-seed --repeat 5)",
      copies, info.name, change, against, row.threshold.to_string());
  return verdict;
}

// "slower"/"faster" for the speed metrics, "higher"/"lower" for the rest.
std::string_view change_word(const MetricInfo& info, double change) {
  if (info.unit == "samples/s" || info.unit == "ms") {
    const bool worse = info.direction == Direction::higher_is_better ? change < 0 : change > 0;
    return worse ? "slower" : "faster";
  }
  return change > 0 ? "higher" : "lower";
}

std::string interval_text(double low, double high, const Threshold& threshold) {
  return fmt::format("95 % CI {} to {}", change_text(low, threshold), change_text(high, threshold));
}

// Where the change's interval comes from, or why there is none.
std::string change_basis(const MetricRow& row) {
  const Verdict& verdict = row.verdict;
  if (row.exact) {
    return "same spec and environment under strict determinism: judged bit for bit";
  }
  if (const auto& run = verdict.run_evidence) {
    const std::string runs = fmt::format("{}+{} runs{}", run->runs_a, run->runs_b,
                                         run->history_runs > 0 ? fmt::format(", {} earlier", run->history_runs) : "");
    return std::isfinite(run->ci_low) ? fmt::format("{}, {}", interval_text(run->ci_low, run->ci_high, row.threshold), runs)
                                      : runs + "; no interval: the run-to-run noise is unknown";
  }
  if (const auto& sampled = verdict.evidence) {
    if (sampled->paired) {
      return fmt::format("{}, {} seed pairs", interval_text(sampled->change_low, sampled->change_high, row.threshold),
                         sampled->paired->pairs);
    }
    if (sampled->ratio) {
      return fmt::format("95 % CI of the ratio of medians {} to {}, {}+{} runs", change_text(sampled->ratio->low - 1, k_percent),
                         change_text(sampled->ratio->high - 1, k_percent), row.n_a, row.n_b);
    }
    return fmt::format("{}+{} runs", row.n_a, row.n_b);
  }
  if (row.one_trajectory) {
    return "one trajectory per side: no interval; vary the seed to judge it";
  }
  return fmt::format("{}+{} runs", row.n_a, row.n_b);
}

// What changed by how much, in words (MetricRow::change).
std::string change_sentence(const MetricInfo& info, const MetricRow& row) {
  const Verdict& verdict = row.verdict;
  if (!std::isfinite(verdict.a) || !std::isfinite(verdict.b)) {
    return "";
  }
  double change = change_in_terms(verdict, row.threshold);
  if (verdict.run_evidence) {
    change = verdict.run_evidence->change;
  } else if (verdict.evidence && verdict.evidence->paired) {
    change = verdict.evidence->change;
  }
  if (!std::isfinite(change)) {
    return "";
  }
  if (change == 0) {
    return fmt::format("B equals A ({})", change_basis(row));
  }
  return fmt::format("B is {} {} than A ({})", size_text(std::fabs(change), row.threshold), change_word(info, change),
                     change_basis(row));
}

// Collects the metric rows; timing metrics and sampled correctness metrics are judged together
// afterwards (one family each).
class MetricJudge {
 public:
  MetricJudge(const std::vector<RunData>& a, const std::vector<RunData>& b, const std::vector<RunData>& history,
              const CompareOptions& options, const Reproducibility& reproducibility)
      : m_a(a), m_b(b), m_history(history), m_options(options), m_reproducibility(reproducibility) {}

  std::vector<MetricRow> judge() {
    for (const auto& info : k_metrics) {
      const auto [threshold, origin] = threshold_for(info, m_b.front().spec, m_options);
      MetricRow row;
      row.direction = info.direction;
      row.threshold = threshold;
      row.threshold_origin = origin;
      row.unit = std::string(info.unit);
      row.n_a = row.n_b = 1;
      info.timing ? add_timing(info, std::move(row)) : add_correctness(info, std::move(row));
    }
    finish_timing();
    finish_sampled();
    for (auto& row : m_rows) {
      row.change = change_sentence(*find_metric(row.verdict.metric), row);
    }
    return std::move(m_rows);
  }

 private:
  void add_timing(const MetricInfo& info, MetricRow row) {
    RunLevelMetric metric{std::string(info.name),   info.direction,           row.threshold,
                          timing_values(m_a, info), timing_values(m_b, info), values_by_configuration(m_history, info)};
    if (finite_count(metric.a) == 0 && finite_count(metric.b) == 0) {
      return;
    }
    row.source = MetricSource::run_values;
    row.n_a = row.runs_a = finite_count(metric.a);
    row.n_b = row.runs_b = finite_count(metric.b);
    m_timing.push_back(std::move(metric));
    m_timing_rows.push_back(m_rows.size());
    m_rows.push_back(std::move(row));
  }

  void add_correctness(const MetricInfo& info, MetricRow row) {
    if (!present(m_a, info.name) && !present(m_b, info.name)) {
      return;
    }
    const bool groups = m_a.size() > 1 || m_b.size() > 1;
    row.source = groups ? MetricSource::run_values : MetricSource::value;
    row.runs_a = runs_with_value(m_a, info.name);
    row.runs_b = runs_with_value(m_b, info.name);
    if (m_reproducibility.required) {
      row.n_a = groups ? row.runs_a : 1;
      row.n_b = groups ? row.runs_b : 1;
      row.exact = true;
      row.verdict = judge_exact(info, row, m_a, m_b);
      m_rows.push_back(std::move(row));
      return;
    }
    const auto observed_a = distinct_observations(m_a, info.name);
    const auto observed_b = distinct_observations(m_b, info.name);
    row.n_a = observed_a.size();
    row.n_b = observed_b.size();
    const auto pairs = pair_by_seed(m_a, m_b);
    if (observed_a.size() <= 1 && observed_b.size() <= 1) {
      row.n_a = row.n_b = 1;
      row.one_trajectory = !observed_a.empty() && !observed_b.empty();
      row.verdict = judge_one_trajectory(info, row, observed_a.empty() ? k_nan : observed_a.front().value,
                                         observed_b.empty() ? k_nan : observed_b.front().value);
    } else if (pairs) {
      SampledMetric metric{std::string(info.name), info.direction, row.threshold, Statistic::value, {}, {}, true};
      for (const auto& [i, j] : *pairs) {
        const double a = summary_value(m_a[i], info.name);
        const double b = summary_value(m_b[j], info.name);
        if (std::isfinite(a) && std::isfinite(b)) {
          metric.a.push_back(a);
          metric.b.push_back(b);
        }
      }
      row.paired = true;
      row.n_a = row.n_b = metric.a.size();
      m_sampled.push_back(std::move(metric));
      m_sampled_rows.push_back(m_rows.size());
    } else {
      m_sampled.push_back({std::string(info.name), info.direction, row.threshold, Statistic::value,
                           values_of(observed_a), values_of(observed_b)});
      m_sampled_rows.push_back(m_rows.size());
    }
    m_rows.push_back(std::move(row));
  }

  static std::vector<double> values_of(const std::vector<Observation>& observations) {
    std::vector<double> values;
    for (const auto& observation : observations) values.push_back(observation.value);
    return values;
  }

  void finish_timing() {
    const auto verdicts = judge_run_level(m_timing, m_options.noise);
    for (size_t i = 0; i < verdicts.size(); ++i) {
      MetricRow& row = m_rows[m_timing_rows[i]];
      row.verdict = verdicts[i];
      row.history_runs = verdicts[i].run_evidence ? verdicts[i].run_evidence->history_runs : 0;
    }
  }

  void finish_sampled() {
    const auto verdicts = judge_samples(m_sampled, m_options.samples);
    for (size_t i = 0; i < verdicts.size(); ++i) {
      MetricRow& row = m_rows[m_sampled_rows[i]];
      row.verdict = verdicts[i];
      if (!row.paired && (row.n_a < row.runs_a || row.n_b < row.runs_b)) {
        row.verdict.reason += fmt::format(" ({} runs of A are {} distinct trajectories, {} of B are {}: copies count once)",
                                          row.runs_a, row.n_a, row.runs_b, row.n_b);
      }
    }
  }

  const std::vector<RunData>& m_a;
  const std::vector<RunData>& m_b;
  const std::vector<RunData>& m_history;
  const CompareOptions& m_options;
  const Reproducibility& m_reproducibility;
  std::vector<MetricRow> m_rows;
  std::vector<RunLevelMetric> m_timing;
  std::vector<size_t> m_timing_rows;
  std::vector<SampledMetric> m_sampled;
  std::vector<size_t> m_sampled_rows;
};

std::optional<std::int64_t> step_at(const std::vector<std::int64_t>& steps, std::optional<size_t> index) {
  if (!index || *index >= steps.size()) {
    return std::nullopt;
  }
  return steps[*index];
}

CurveReport compare_loss(const RunData& a, const RunData& b) {
  CurveReport report;
  report.available = !a.loss.empty() && !b.loss.empty();
  const json sha_a = a.summary.value(util::summary_key::loss_curve_sha256, json());
  const json sha_b = b.summary.value(util::summary_key::loss_curve_sha256, json());
  report.sha_equal = sha_a.is_string() && sha_a == sha_b;
  std::vector<float> curve_a(a.loss.begin(), a.loss.end());
  std::vector<float> curve_b(b.loss.begin(), b.loss.end());
  report.curves = compare_curves(curve_a, curve_b);
  report.first_divergence_step =
      step_at(a.loss_steps.size() >= b.loss_steps.size() ? b.loss_steps : a.loss_steps, report.curves.first_divergence);
  if (!report.first_divergence_step && report.curves.first_divergence) {
    report.first_divergence_step = step_at(a.loss_steps.size() > b.loss_steps.size() ? a.loss_steps : b.loss_steps,
                                           report.curves.first_divergence);
  }
  report.max_difference_step = step_at(a.loss_steps, report.curves.max_difference_index);
  return report;
}

RunDescription describe(const RunData& run, std::string side) {
  RunDescription description{std::move(side), run.record.id, {}, 0, 0, 0, 0};
  for (const auto& info : k_metrics) {
    if (info.timing)
      description.values.emplace_back(info.name, run_value(run, info));
  }
  if (const auto found = run.samples.find(k_throughput_series); found != run.samples.end() && !found->second.empty()) {
    description.steps = found->second.size();
    description.p5 = percentile(found->second, 5);
    description.p50 = percentile(found->second, 50);
    description.p95 = percentile(found->second, 95);
  }
  return description;
}

void list_statuses(Comparison& result) {
  if (!result.reproducibility.identical) {
    result.regressions.push_back("reproducibility");
  }
  for (const auto& row : result.metrics) {
    if (row.verdict.status == Status::regression)
      result.regressions.push_back(row.verdict.metric);
    if (row.verdict.status == Status::inconclusive)
      result.inconclusive.push_back(row.verdict.metric);
  }
  result.outcome = !result.not_comparable.empty() ? Outcome::not_comparable
                   : !result.regressions.empty()  ? Outcome::regression
                   : !result.inconclusive.empty() ? Outcome::inconclusive
                                                  : Outcome::no_regression;
}

void add_plot_data(Comparison& result, const std::vector<RunData>& a, const std::vector<RunData>& b) {
  result.curve = compare_loss(a.front(), b.front());
  result.loss_steps_a = a.front().loss_steps;
  result.loss_steps_b = b.front().loss_steps;
  result.loss_a = a.front().loss;
  result.loss_b = b.front().loss;
  result.throughput_a = pooled(a, k_throughput_series);
  result.throughput_b = pooled(b, k_throughput_series);
  result.phases_a = a.front().phases;
  result.phases_b = b.front().phases;
  result.straggler_a = a.front().straggler;
  result.straggler_b = b.front().straggler;
  for (const auto& [side, runs] : {std::pair{"A", &a}, std::pair{"B", &b}}) {
    for (const auto& run : *runs) result.runs.push_back(describe(run, side));
  }
}

}  // namespace

Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options,
                        const std::vector<RunData>& history) {
  if (a.empty() || b.empty()) {
    throw util::CompareError("compare needs at least one run on each side");
  }
  check_override_names(options);
  Comparison result;
  result.a = side_info(a);
  result.b = side_info(b);
  result.ignored = options.ignore;
  result.spec_changes = spec_changes(a.front(), b.front(), options.ignore);
  if (a.front().fingerprint && b.front().fingerprint) {
    result.env_available = true;
    result.env_changes = env::diff_fingerprints(env::Fingerprint::from_json(*a.front().fingerprint, "run A"),
                                                env::Fingerprint::from_json(*b.front().fingerprint, "run B"));
  }
  result.reproducibility = check_reproducibility(a, b);
  result.metrics = MetricJudge(a, b, history, options, result.reproducibility).judge();
  for (const auto& run : history) {
    result.history.push_back(run.record.id);
  }
  add_plot_data(result, a, b);
  result.not_comparable = incomparable_reasons(a, b);
  list_statuses(result);
  return result;
}

Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options) {
  return compare_runs(a, b, options, {});
}

}  // namespace expctl::compare
