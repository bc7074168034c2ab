#include "expctl/compare/run_noise.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "expctl/compare/statistics.hpp"

namespace expctl::compare {

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
// The interval a report prints beside a change is the conventional 95 % one (two-sided), not the
// test's Holm level: it answers "by how much", the p-value "whether".
constexpr double k_interval_quantile = 0.975;

// The values a metric is compared on: logs for the relative scale (so a shift is a ratio).
std::vector<double> transformed(std::span<const double> values, Scale scale) {
  std::vector<double> out;
  for (const double value : values) {
    if (std::isfinite(value) && (scale == Scale::absolute || value > 0)) {
      out.push_back(scale == Scale::relative ? std::log(value) : value);
    }
  }
  return out;
}

NoiseEstimate noise_of(std::span<const std::vector<double>> groups) {
  NoiseEstimate noise;
  for (const auto& group : groups) {
    if (group.size() >= 2) {
      noise.runs += group.size();
      noise.groups += 1;
      noise.df += k_noise_df_efficiency * static_cast<double>(group.size() - 1);
    }
  }
  noise.sigma = pooled_huber_scale(groups).value_or(k_nan);
  return noise;
}

// A change on the comparison scale in the threshold's terms (signed).
double in_threshold_terms(double shift, Scale scale) {
  return scale == Scale::relative ? std::expm1(shift) : shift;
}

// A non-negative size on the comparison scale as a change in the worse direction.
double worse_size(double size, Scale scale, Direction direction) {
  if (scale == Scale::absolute) {
    return size;
  }
  return direction == Direction::higher_is_better ? -std::expm1(-size) : std::expm1(size);
}

// Standard error of the Hodges–Lehmann shift per unit of run-to-run noise. With more than one run
// on a side the shift is median-like: √(π/3) is its variance ratio to a difference of means.
double error_factor(size_t runs_a, size_t runs_b) {
  const double factor = std::sqrt(1.0 / static_cast<double>(runs_a) + 1.0 / static_cast<double>(runs_b));
  return std::max(runs_a, runs_b) >= 2 ? factor * std::sqrt(std::numbers::pi / 3) : factor;
}

// |t| that is significant for the first metric of a Holm family of `family`.
double critical_t(double df, size_t family, double alpha) {
  return student_t_quantile(1 - alpha / (2.0 * static_cast<double>(family)), df);
}

double mde_shift(double sigma, double df, size_t runs_a, size_t runs_b, size_t family, const NoiseOptions& options) {
  return (critical_t(df, family, options.alpha) + student_t_quantile(options.power, df)) * sigma *
         error_factor(runs_a, runs_b);
}

struct Prepared {
  std::vector<double> a;
  std::vector<double> b;
  std::vector<std::vector<double>> groups;  ///< sides of two or more runs, then the history
  NoiseEstimate history;
  size_t history_runs = 0;
};

Prepared prepare(const RunLevelMetric& metric, Scale scale) {
  Prepared prepared{transformed(metric.a, scale), transformed(metric.b, scale), {}, {}, 0};
  for (const auto* side : {&prepared.a, &prepared.b}) {
    if (side->size() >= 2) {
      prepared.groups.push_back(*side);
    }
  }
  std::vector<std::vector<double>> history;
  for (const auto& group : metric.history) {
    history.push_back(transformed(group, scale));
    prepared.history_runs += history.back().size() >= 2 ? history.back().size() : 0;
  }
  prepared.history = noise_of(history);
  prepared.groups.insert(prepared.groups.end(), history.begin(), history.end());
  return prepared;
}

RunLevelEvidence evidence_of(const Prepared& prepared, Scale scale) {
  RunLevelEvidence evidence;
  evidence.scale = scale;
  evidence.runs_a = prepared.a.size();
  evidence.runs_b = prepared.b.size();
  evidence.history_runs = prepared.history_runs;
  evidence.noise = noise_of(prepared.groups);
  const double shift = hodges_lehmann_shift(prepared.a, prepared.b);
  evidence.change = in_threshold_terms(shift, scale);
  if (!evidence.noise.known()) {
    return evidence;
  }
  const double error = evidence.noise.sigma * error_factor(evidence.runs_a, evidence.runs_b);
  evidence.t = error > 0 ? shift / error : (shift == 0 ? 0.0 : std::copysign(INFINITY, shift));
  evidence.p_value = std::min(1.0, 2 * student_t_cdf(-std::fabs(evidence.t), evidence.noise.df));
  evidence.noise_fraction = noise_in_threshold_terms(evidence.noise, scale);
  evidence.standard_error = in_threshold_terms(error, scale);
  const double half = student_t_quantile(k_interval_quantile, evidence.noise.df) * error;
  evidence.ci_low = in_threshold_terms(shift - half, scale);
  evidence.ci_high = in_threshold_terms(shift + half, scale);
  return evidence;
}

// Band, MDE and the Holm results once the family is known.
void finish_evidence(RunLevelEvidence& evidence, Direction direction, size_t family, const NoiseOptions& options) {
  evidence.family = family;
  const double error = evidence.noise.sigma * error_factor(evidence.runs_a, evidence.runs_b);
  evidence.band = worse_size(critical_t(evidence.noise.df, family, options.alpha) * error, evidence.scale, direction);
  evidence.mde = minimum_detectable_effect(evidence.noise, evidence.runs_a, evidence.runs_b, evidence.scale, direction,
                                           family, options);
}

std::string evidence_text(const RunLevelEvidence& evidence) {
  const bool sides = evidence.runs_a >= 2 || evidence.runs_b >= 2;
  const std::string runs = fmt::format("{}+{} runs", evidence.runs_a, evidence.runs_b);
  const std::string earlier =
      fmt::format("{} earlier run{}", evidence.history_runs, evidence.history_runs == 1 ? "" : "s");
  if (sides && evidence.history_runs > 0) {
    return runs + " and " + earlier;
  }
  return sides ? runs : earlier;
}

Verdict base_verdict(const RunLevelMetric& metric) {
  Verdict verdict;
  verdict.metric = metric.name;
  const auto middle = [](const std::vector<double>& values) {
    std::vector<double> finite;
    std::copy_if(values.begin(), values.end(), std::back_inserter(finite), [](double v) { return std::isfinite(v); });
    return finite.empty() ? k_nan : median(finite);
  };
  verdict.a = middle(metric.a);
  verdict.b = middle(metric.b);
  verdict.absolute_delta = verdict.b - verdict.a;
  if (verdict.a != 0 && std::isfinite(verdict.a) && std::isfinite(verdict.b)) {
    verdict.relative_delta = (verdict.b - verdict.a) / std::fabs(verdict.a);
  }
  return verdict;
}

std::string rerun_text(const RunLevelMetric& metric, const RunLevelEvidence& evidence, const NoiseOptions& options) {
  if (evidence.suggested_repeat > 0) {
    return fmt::format("rerun with `expctl ab … --repeat {}`", evidence.suggested_repeat);
  }
  return fmt::format(
      "its run-to-run noise (±{} a run) is too large for threshold {} even with {} runs a side: "
      "widen the threshold or quiet the machine",
      size_text(evidence.noise_fraction, metric.threshold), metric.threshold.to_string(), options.max_repeat);
}

// Runs a side that would decide an inconclusive metric.
size_t suggestion(const RunLevelMetric& metric, const Prepared& prepared, const RunLevelEvidence& evidence,
                  double worse, const NoiseOptions& options) {
  if (!evidence.noise.known()) {
    return options.unknown_repeat;
  }
  const double target = std::max(metric.threshold.tolerance(), worse);
  return runs_needed(prepared.history, evidence.noise.sigma, target, evidence.scale, metric.direction, evidence.family,
                     options);
}

struct Decision {
  Status status = Status::ok;
  std::string reason;
};

// The pieces every reason is made of, in the threshold's unit.
struct Wording {
  std::string change;
  std::string limit;
  std::string from;
  std::string p;
  std::string band;
};

Wording wording_of(const RunLevelMetric& metric, const RunLevelEvidence& evidence) {
  return {change_text(evidence.change, metric.threshold), metric.threshold.to_string(), evidence_text(evidence),
          significance_text("t-test", evidence.p_value, evidence.adjusted_p, evidence.level, evidence.alpha,
                            evidence.family),
          size_text(evidence.band, metric.threshold)};
}

double worse_change(const RunLevelMetric& metric, const RunLevelEvidence& evidence) {
  return metric.direction == Direction::higher_is_better ? -evidence.change : evidence.change;
}

Decision decide_significant(double worse, double tolerance, const Wording& w) {
  if (worse > tolerance) {
    return {Status::regression, fmt::format("{} is beyond threshold {} and the ±{} run-to-run noise band of {} ({})",
                                            w.change, w.limit, w.band, w.from, w.p)};
  }
  if (worse < -tolerance) {
    return {Status::improvement, fmt::format("{} is better than threshold {} and beyond the ±{} noise band of {} ({})",
                                             w.change, w.limit, w.band, w.from, w.p)};
  }
  return {Status::ok, fmt::format("{} is significant ({}) but within threshold {}", w.change, w.p, w.limit)};
}

// Worse than the threshold, not significant: inside the band (or past it only before Holm).
std::string inside_band_reason(double worse, const RunLevelEvidence& evidence, const Wording& w) {
  if (std::fabs(worse) <= evidence.band) {
    return fmt::format("{} is inside the ±{} run-to-run noise band of {} ({})", w.change, w.band, w.from, w.p);
  }
  return fmt::format("{} is beyond threshold {} but not significant ({}) with the ±{} run-to-run noise band of {}",
                     w.change, w.limit, w.p, w.band, w.from);
}

std::string noisy_reason(const RunLevelMetric& metric, const RunLevelEvidence& evidence, const Wording& w) {
  return fmt::format("{} is within threshold {}, but the change's noise (±{}; ±{} a run from {}) exceeds it", w.change,
                     w.limit, size_text(evidence.standard_error, metric.threshold),
                     size_text(evidence.noise_fraction, metric.threshold), w.from);
}

// An undecided metric: the reason, then what would decide it.
Decision undecided(const RunLevelMetric& metric, RunLevelEvidence& evidence, const Prepared& prepared,
                   const NoiseOptions& options, double target, const std::string& reason) {
  evidence.suggested_repeat = suggestion(metric, prepared, evidence, target, options);
  return {Status::inconclusive, reason + "; " + rerun_text(metric, evidence, options)};
}

Decision decide(const RunLevelMetric& metric, RunLevelEvidence& evidence, const Prepared& prepared,
                const NoiseOptions& options) {
  const double tolerance = metric.threshold.tolerance();
  const double worse = worse_change(metric, evidence);
  const Wording w = wording_of(metric, evidence);
  if (!evidence.noise.known()) {
    return undecided(metric, evidence, prepared, options, worse,
                     fmt::format("{} with {}+{} runs and no earlier runs of the same spec on the same environment: "
                                 "the run-to-run noise is unknown",
                                 w.change, evidence.runs_a, evidence.runs_b));
  }
  if (evidence.adjusted_p <= options.alpha) {
    return decide_significant(worse, tolerance, w);
  }
  if (worse > tolerance) {
    return undecided(metric, evidence, prepared, options, worse, inside_band_reason(worse, evidence, w));
  }
  if (evidence.standard_error > tolerance) {
    return undecided(metric, evidence, prepared, options, 0, noisy_reason(metric, evidence, w));
  }
  return {Status::ok, fmt::format("{} is within threshold {} (noise ±{} a run from {}, MDE {})", w.change, w.limit,
                                  size_text(evidence.noise_fraction, metric.threshold), w.from,
                                  size_text(evidence.mde, metric.threshold))};
}

Verdict too_few(const RunLevelMetric& metric, const Prepared& prepared) {
  Verdict verdict = base_verdict(metric);
  verdict.status = Status::too_few_samples;
  verdict.reason = fmt::format("no usable run value: A has {}, B has {} (a timing metric needs one a side)",
                               prepared.a.size(), prepared.b.size());
  return verdict;
}

// The evidence of a metric with a value on both sides; nullopt otherwise.
std::optional<RunLevelEvidence> tested(const Prepared& prepared, Scale scale) {
  if (prepared.a.empty() || prepared.b.empty()) {
    return std::nullopt;
  }
  return evidence_of(prepared, scale);
}

Verdict judged(const RunLevelMetric& metric, RunLevelEvidence& evidence, const Prepared& prepared,
               const NoiseOptions& options) {
  Verdict verdict = base_verdict(metric);
  const Decision decision = decide(metric, evidence, prepared, options);
  verdict.threshold_crossed = worse_change(metric, evidence) > metric.threshold.tolerance();
  verdict.status = decision.status;
  verdict.reason = decision.reason;
  verdict.run_evidence = evidence;
  return verdict;
}

}  // namespace

std::string change_text(double change, const Threshold& threshold) {
  switch (threshold.unit) {
    case ThresholdUnit::percent:
      return fmt::format("{:+.1f}%", 100 * change);
    case ThresholdUnit::percentage_points:
      return fmt::format("{:+.2f}pp", 100 * change);
    case ThresholdUnit::absolute:
      return fmt::format("{:+.4g}", change);
  }
  return fmt::format("{}", change);
}

std::string size_text(double size, const Threshold& threshold) {
  // With one or two degrees of freedom a band can be any size: past 1000 % it says nothing more.
  if (threshold.unit == ThresholdUnit::percent && size > 10) {
    return ">1000%";
  }
  std::string text = change_text(size, threshold);
  return text.front() == '+' ? text.substr(1) : text;
}

Scale scale_of(const Threshold& threshold) {
  return threshold.is_relative() ? Scale::relative : Scale::absolute;
}

NoiseEstimate estimate_noise(std::span<const std::vector<double>> groups, Scale scale) {
  std::vector<std::vector<double>> values;
  for (const auto& group : groups) {
    values.push_back(transformed(group, scale));
  }
  return noise_of(values);
}

double noise_in_threshold_terms(const NoiseEstimate& noise, Scale scale) {
  return noise.known() ? in_threshold_terms(noise.sigma, scale) : k_nan;
}

double minimum_detectable_effect(const NoiseEstimate& noise, size_t runs_a, size_t runs_b, Scale scale,
                                 Direction direction, size_t family, const NoiseOptions& options) {
  if (!noise.known() || runs_a == 0 || runs_b == 0) {
    return k_nan;
  }
  const double shift = mde_shift(noise.sigma, noise.df, runs_a, runs_b, std::max<size_t>(1, family), options);
  return worse_size(shift, scale, direction);
}

size_t runs_needed(const NoiseEstimate& history, double sigma, double target, Scale scale, Direction direction,
                   size_t family, const NoiseOptions& options) {
  if (!std::isfinite(sigma)) {
    return options.unknown_repeat;
  }
  const auto decides = [&](size_t runs) {
    const NoiseEstimate future{sigma, history.df + 2 * k_noise_df_efficiency * static_cast<double>(runs - 1), 0, 0};
    return minimum_detectable_effect(future, runs, runs, scale, direction, family, options) <= target;
  };
  if (options.max_repeat < 2 || !decides(options.max_repeat)) {
    return 0;
  }
  // The MDE falls with every run added: bisect for the first count that decides.
  size_t low = 1;
  size_t high = options.max_repeat;
  while (high - low > 1) {
    const size_t middle = (low + high) / 2;
    (decides(middle) ? high : low) = middle;
  }
  return high;
}

std::optional<std::string> threshold_below_noise(std::string_view metric, const Threshold& threshold,
                                                 const NoiseEstimate& noise) {
  const double floor = noise_in_threshold_terms(noise, scale_of(threshold));
  if (!std::isfinite(floor) || floor <= threshold.tolerance()) {
    return std::nullopt;
  }
  return fmt::format("threshold {} of {} is below its run-to-run noise of ±{} ({} runs): widen it or use --repeat",
                     threshold.to_string(), metric, size_text(floor, threshold), noise.runs);
}

std::vector<Verdict> judge_run_level(std::span<const RunLevelMetric> metrics, const NoiseOptions& options) {
  std::vector<Prepared> prepared;
  std::vector<std::optional<RunLevelEvidence>> evidence;
  std::vector<double> p_values;
  for (const auto& metric : metrics) {
    prepared.push_back(prepare(metric, scale_of(metric.threshold)));
    evidence.push_back(tested(prepared.back(), scale_of(metric.threshold)));
    if (evidence.back() && evidence.back()->noise.known())
      p_values.push_back(evidence.back()->p_value);
  }
  const std::vector<double> adjusted = holm_adjust(p_values);
  const std::vector<double> levels = holm_levels(p_values, options.alpha);
  std::vector<Verdict> verdicts;
  size_t next = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (evidence[i] && evidence[i]->noise.known()) {
      evidence[i]->level = levels[next];
      evidence[i]->alpha = options.alpha;
      evidence[i]->adjusted_p = adjusted[next++];
      finish_evidence(*evidence[i], metrics[i].direction, p_values.size(), options);
    }
    verdicts.push_back(evidence[i] ? judged(metrics[i], *evidence[i], prepared[i], options)
                                   : too_few(metrics[i], prepared[i]));
  }
  return verdicts;
}

Verdict judge_run_level(const RunLevelMetric& metric, const NoiseOptions& options) {
  return judge_run_level(std::span<const RunLevelMetric>(&metric, 1), options).front();
}

}  // namespace expctl::compare
