#include "expctl/compare/comparison.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "expctl/env/fingerprint.hpp"
#include "expctl/util/error.hpp"

namespace expctl::compare {

using nlohmann::json;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

json parse_object(const std::string& text) {
  json value = json::parse(text, nullptr, false);
  return value.is_discarded() || !value.is_object() ? json::object() : value;
}

// The runner's warm-up rule (docs/run.md) when a summary predates the warmup_steps field.
std::int64_t warmup_of(const json& summary, std::int64_t steps) {
  if (const auto found = summary.find("warmup_steps"); found != summary.end() && found->is_number_integer()) {
    return found->get<std::int64_t>();
  }
  return std::min<std::int64_t>(10, steps / 10);
}

json resolved_spec(const store::RunRecord& run) {
  std::ifstream in(run.run_dir / "resolved.json");
  if (!in) {
    return nullptr;
  }
  const json document = json::parse(in, nullptr, false);
  if (document.is_discarded() || !document.is_object() || !document.contains("spec")) {
    return nullptr;
  }
  return document.at("spec");
}

}  // namespace

std::vector<double> step_samples(const std::vector<store::MetricPoint>& points, std::int64_t warmup, bool sum) {
  std::map<std::int64_t, double> per_step;
  for (const auto& point : points) {
    if (point.step <= warmup || !std::isfinite(point.value)) {
      continue;
    }
    auto [slot, inserted] = per_step.try_emplace(point.step, point.value);
    if (!inserted) {
      slot->second = sum ? slot->second + point.value : std::max(slot->second, point.value);
    }
  }
  std::vector<double> values;
  values.reserve(per_step.size());
  for (const auto& [step, value] : per_step) {
    values.push_back(value);
  }
  return values;
}

std::vector<double> wait_fraction_samples(const std::vector<store::MetricPoint>& waits,
                                          const std::vector<store::MetricPoint>& times, std::int64_t warmup) {
  std::map<std::int64_t, std::pair<double, double>> per_step;  // step -> (wait, time)
  for (const auto& point : waits) {
    if (point.step > warmup && std::isfinite(point.value)) {
      per_step[point.step].first += point.value;
    }
  }
  for (const auto& point : times) {
    if (point.step > warmup && std::isfinite(point.value)) {
      per_step[point.step].second += point.value;
    }
  }
  std::vector<double> fractions;
  for (const auto& [step, totals] : per_step) {
    if (totals.second > 0) {
      fractions.push_back(totals.first / totals.second);
    }
  }
  return fractions;
}

RunData load_run(const store::Store& store, const store::RunRecord& run) {
  RunData data;
  data.record = run;
  data.summary = parse_object(run.summary_json);
  if (const auto spec = store.spec(run.spec_hash)) {
    const json canonical = parse_object(spec->canonical);
    data.spec = canonical.value("spec", json::object());
    data.env_profile = canonical.value("env_profile", json());
  }
  if (json full = resolved_spec(run); full.is_object()) {
    data.spec = std::move(full);
  }
  if (run.environment_hash) {
    if (const auto text = store.environment(*run.environment_hash)) {
      data.fingerprint = parse_object(*text);
    }
  }
  for (const auto& point : store.metrics(run.id, {.name = std::string(k_loss_series), .rank = 0})) {
    data.loss_steps.push_back(point.step);
    data.loss.push_back(point.value);
  }
  const std::int64_t warmup = warmup_of(data.summary, static_cast<std::int64_t>(data.loss.size()));
  data.samples[k_throughput_series] = step_samples(
      store.metrics(run.id, {.name = std::string(k_throughput_series), .rank = std::nullopt}), warmup, true);
  const auto times = store.metrics(run.id, {.name = std::string(k_step_time_series), .rank = std::nullopt});
  data.samples[k_step_time_series] = step_samples(times, warmup, false);
  // The wait share is judged per step too: one run's single fraction carries no noise estimate,
  // and on a shared machine it moves by tens of points between identical runs.
  const auto waits = store.metrics(run.id, {.name = std::string(k_comm_wait_series), .rank = std::nullopt});
  if (!waits.empty()) {
    data.samples[k_comm_wait_fraction_series] = wait_fraction_samples(waits, times, warmup);
  }
  return data;
}

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

std::string Comparison::verdict_line() const {
  const auto join = [](const std::vector<std::string>& items, std::string_view separator) {
    std::string text;
    for (const auto& item : items) {
      text += (text.empty() ? "" : std::string(separator)) + item;
    }
    return text;
  };
  switch (outcome) {
    case Outcome::not_comparable:
      return "not comparable: " + join(not_comparable, "; ");
    case Outcome::regression:
      return "regression in " + join(regressions, ", ");
    case Outcome::no_regression:
      return "no regression";
  }
  return "no regression";
}

int exit_code(Outcome outcome) {
  switch (outcome) {
    case Outcome::no_regression:
      return static_cast<int>(util::ExitCode::ok);
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

std::vector<spec::SpecChange> spec_changes(const RunData& a, const RunData& b, const std::vector<std::string>& ignore) {
  std::vector<spec::SpecChange> changes;
  for (auto& change : spec::diff_values(a.spec, b.spec)) {
    if (!is_ignored(change.path, ignore)) {
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
  if (dataset_a != dataset_b) {
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
      const json drift = run.summary.value("drift", json());
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

std::vector<double> run_values(const std::vector<RunData>& side, std::string_view name) {
  std::vector<double> values;
  for (const auto& run : side) {
    if (const double value = summary_value(run, name); std::isfinite(value)) {
      values.push_back(value);
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

// Builds every metric row; sampled rows are judged together afterwards (one Holm family).
std::vector<MetricRow> judge_metrics(const std::vector<RunData>& a, const std::vector<RunData>& b,
                                     const CompareOptions& options) {
  const bool groups = a.size() > 1 || b.size() > 1;
  std::vector<MetricRow> rows;
  std::vector<SampledMetric> sampled;
  std::vector<size_t> sampled_rows;
  for (const auto& info : k_metrics) {
    const auto [threshold, origin] = threshold_for(info, b.front().spec, options);
    MetricRow row{Verdict{}, info.direction, threshold, origin, std::string(info.unit), MetricSource::value, 1, 1};
    std::vector<double> samples_a;
    std::vector<double> samples_b;
    // comm_wait_fraction has no raw series of its own in the metric table: its per-step
    // samples are derived (see wait_fraction_samples) and judged by their median.
    const bool derived = info.name == k_comm_wait_fraction_series;
    const std::string series = derived ? std::string(k_comm_wait_fraction_series) : std::string(info.series);
    if (!series.empty()) {
      samples_a = pooled(a, series);
      samples_b = pooled(b, series);
      row.source = MetricSource::step_samples;
    }
    if (samples_a.empty() && samples_b.empty()) {
      if (!present(a, info.name) && !present(b, info.name)) {
        continue;
      }
      if (groups) {
        samples_a = run_values(a, info.name);
        samples_b = run_values(b, info.name);
        row.source = MetricSource::run_values;
      } else {
        row.source = MetricSource::value;
        row.verdict = judge_values(info.name, summary_value(a.front(), info.name), summary_value(b.front(), info.name),
                                   threshold, info.direction);
        rows.push_back(std::move(row));
        continue;
      }
    }
    row.n_a = samples_a.size();
    row.n_b = samples_b.size();
    const Statistic statistic = row.source == MetricSource::run_values ? Statistic::value
                                : derived                              ? Statistic::median
                                                                       : info.statistic;
    sampled.push_back(
        {std::string(info.name), info.direction, threshold, statistic, std::move(samples_a), std::move(samples_b)});
    sampled_rows.push_back(rows.size());
    rows.push_back(std::move(row));
  }
  const auto verdicts = judge_samples(sampled, options.samples);
  for (size_t i = 0; i < verdicts.size(); ++i) {
    rows[sampled_rows[i]].verdict = verdicts[i];
  }
  return rows;
}

std::optional<std::int64_t> step_at(const std::vector<std::int64_t>& steps, std::optional<size_t> index) {
  if (!index || *index >= steps.size()) {
    return std::nullopt;
  }
  return steps[*index];
}

CurveReport compare_loss(const RunData& a, const RunData& b) {
  CurveReport report;
  report.available = !a.loss.empty() && !b.loss.empty();
  const json sha_a = a.summary.value("loss_curve_sha256", json());
  const json sha_b = b.summary.value("loss_curve_sha256", json());
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

}  // namespace

Comparison compare_runs(const std::vector<RunData>& a, const std::vector<RunData>& b, const CompareOptions& options) {
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
  result.metrics = judge_metrics(a, b, options);
  result.curve = compare_loss(a.front(), b.front());
  result.loss_steps_a = a.front().loss_steps;
  result.loss_steps_b = b.front().loss_steps;
  result.loss_a = a.front().loss;
  result.loss_b = b.front().loss;
  result.throughput_a = pooled(a, k_throughput_series);
  result.throughput_b = pooled(b, k_throughput_series);
  for (const auto& row : result.metrics) {
    if (row.verdict.status == Status::regression) {
      result.regressions.push_back(row.verdict.metric);
    }
  }
  result.not_comparable = incomparable_reasons(a, b);
  result.outcome = !result.not_comparable.empty() ? Outcome::not_comparable
                   : result.regressions.empty()   ? Outcome::no_regression
                                                  : Outcome::regression;
  return result;
}

}  // namespace expctl::compare
