#include "expctl/compare/thresholds.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "expctl/compare/run_noise.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::compare {

namespace {

constexpr std::string_view k_threshold_forms =
    R"(write a relative change like "-5%", percentage points like "-0.5pp" or an absolute change like "0.002")";

struct UnitSuffix {
  std::string_view suffix;
  ThresholdUnit unit;
};

// Written units with a suffix; a threshold without one is absolute.
constexpr UnitSuffix k_unit_suffixes[] = {
    {"%", ThresholdUnit::percent},
    {"pp", ThresholdUnit::percentage_points},
};

util::Error bad_threshold(std::string_view text) {
  return util::Error{fmt::format("invalid threshold {}: {}", util::quoted(text), k_threshold_forms)};
}

// Parses an unsigned decimal ("5", "0.5", ".5", "2e-3"); from_chars alone would also take
// "inf", "nan" and a leading '-', none of which belongs here.
std::optional<double> parse_unsigned_number(std::string_view text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
    return std::nullopt;
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// Which side of the tolerance B lies on. A change exactly at the tolerance crosses nothing.
struct Crossing {
  bool worse = false;
  bool better = false;
};

// The change from A to B is measured in the threshold's units (a fraction of |A| for percent)
// and oriented so that positive means worse. A relative change against A = 0 is infinite in
// whichever way B moved.
Crossing crossing(double a, double b, const Threshold& threshold, Direction direction) {
  double change = b - a;
  if (threshold.is_relative()) {
    const double infinite = std::copysign(std::numeric_limits<double>::infinity(), change);
    change = a != 0 ? change / std::fabs(a) : (change == 0 ? 0 : infinite);
  }
  const double worse = direction == Direction::higher_is_better ? -change : change;
  const double tolerance = threshold.tolerance();
  return Crossing{worse > tolerance, worse < -tolerance};
}

std::optional<double> relative_delta(double a, double b) {
  if (a == 0 || !std::isfinite(a) || !std::isfinite(b)) {
    return std::nullopt;
  }
  return (b - a) / std::fabs(a);
}

Verdict base_verdict(std::string_view metric, double a, double b) {
  Verdict verdict;
  verdict.metric = std::string(metric);
  verdict.a = a;
  verdict.b = b;
  verdict.absolute_delta = b - a;
  verdict.relative_delta = relative_delta(a, b);
  return verdict;
}

// Non-finite values decide on their own: a loss that became NaN is a regression whatever the
// threshold. Nullopt when both values are finite.
std::optional<Verdict> judge_non_finite(std::string_view metric, double a, double b) {
  if (std::isfinite(a) && std::isfinite(b)) {
    return std::nullopt;
  }
  Verdict verdict = base_verdict(metric, a, b);
  if (std::isfinite(a)) {
    verdict.status = Status::regression;
    verdict.threshold_crossed = true;
    verdict.reason = fmt::format("B is not finite ({})", b);
  } else if (std::isfinite(b)) {
    verdict.status = Status::improvement;
    verdict.reason = fmt::format("A is not finite ({})", a);
  } else {
    verdict.reason = "neither A nor B is finite";
  }
  return verdict;
}

double statistic_of(std::span<const double> values, Statistic statistic) {
  if (values.empty()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return statistic == Statistic::p95 ? percentile(values, 95) : median(values);
}

void check_samples_finite(const SampledMetric& metric) {
  const auto check_side = [&](std::span<const double> values, std::string_view side) {
    for (size_t i = 0; i < values.size(); ++i) {
      EXPCTL_CHECK(std::isfinite(values[i]), util::CompareError,
                   "metric {}: sample {} of {} is {}: per-step samples must be finite numbers",
                   util::quoted(metric.name), i, side, values[i]);
    }
  };
  check_side(metric.a, "A");
  check_side(metric.b, "B");
}

// FNV-1a of the metric name: a stable per-metric seed offset, independent of table order.
uint64_t name_hash(std::string_view name) {
  uint64_t hash = 14695981039346656037ULL;
  for (const char c : name) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  return hash;
}

Verdict too_few(const SampledMetric& metric, size_t min_samples) {
  Verdict verdict =
      base_verdict(metric.name, statistic_of(metric.a, metric.statistic), statistic_of(metric.b, metric.statistic));
  verdict.status = Status::too_few_samples;
  verdict.reason = fmt::format("too few samples: A has {}, B has {} (at least {} per side are needed to conclude)",
                               metric.a.size(), metric.b.size(), min_samples);
  return verdict;
}

// Combines the threshold decision on the statistic with the Holm-adjusted deciding test.
Verdict judge_tested(const SampledMetric& metric, const SampleEvidence& evidence, double alpha) {
  const double a = statistic_of(metric.a, metric.statistic);
  const double b = statistic_of(metric.b, metric.statistic);
  Verdict verdict = base_verdict(metric.name, a, b);
  const Crossing crossed = crossing(a, b, metric.threshold, metric.direction);
  verdict.threshold_crossed = crossed.worse;
  const bool crossed_better = crossed.better;

  // The tests are two-sided, so their effect must point the way the statistic moved: for the U
  // test, B stochastically smaller is worse for a higher-is-better metric.
  const double effect = evidence.decided_by == SignificanceTest::mann_whitney ? evidence.test.rank_biserial : b - a;
  const bool effect_worse = metric.direction == Direction::higher_is_better ? effect < 0 : effect > 0;
  const bool significant = evidence.adjusted_p <= alpha;
  const std::string limit = metric.threshold.to_string();
  const std::string_view statistic = to_string(metric.statistic);
  const std::string p_text = significance_text(to_string(evidence.decided_by), evidence.p_value, evidence.adjusted_p,
                                               evidence.level, evidence.alpha, evidence.family);

  if (verdict.threshold_crossed && significant && effect_worse) {
    verdict.status = Status::regression;
    verdict.reason = fmt::format("{} worse beyond threshold {} and significant ({})", statistic, limit, p_text);
  } else if (crossed_better && significant && !effect_worse) {
    verdict.status = Status::improvement;
    verdict.reason = fmt::format("{} better beyond threshold {} and significant ({})", statistic, limit, p_text);
  } else if ((verdict.threshold_crossed || crossed_better) && !significant) {
    verdict.reason = fmt::format("{} beyond threshold {} but not significant ({})", statistic, limit, p_text);
  } else if (verdict.threshold_crossed || crossed_better) {
    verdict.reason =
        fmt::format("{} beyond threshold {} but the test's effect points the other way ({})", statistic, limit, p_text);
  } else {
    verdict.reason = fmt::format("{} within threshold {} ({})", statistic, limit, p_text);
  }
  verdict.evidence = evidence;
  return verdict;
}

// The per-pair differences on the threshold's scale: log ratios for a percent threshold (so the
// mean is a ratio and expm1 turns it into a change), relative differences where a value is not
// positive, metric units for pp and absolute thresholds.
std::vector<double> pair_differences(const SampledMetric& metric) {
  const auto positive = [](const std::vector<double>& values) {
    return std::all_of(values.begin(), values.end(), [](double v) { return v > 0; });
  };
  const bool logs = metric.threshold.is_relative() && positive(metric.a) && positive(metric.b);
  std::vector<double> differences;
  for (size_t i = 0; i < metric.a.size(); ++i) {
    const double a = metric.a[i];
    const double b = metric.b[i];
    if (logs) {
      differences.push_back(std::log(b / a));
    } else if (metric.threshold.is_relative()) {
      if (a != 0)
        differences.push_back((b - a) / std::fabs(a));
    } else {
      differences.push_back(b - a);
    }
  }
  return differences;
}

// A mean difference on the scale of pair_differences in the threshold's terms.
double paired_change(const SampledMetric& metric, double value) {
  const bool logs = metric.threshold.is_relative() && std::all_of(metric.a.begin(), metric.a.end(), [](double v) {
                      return v > 0;
                    }) && std::all_of(metric.b.begin(), metric.b.end(), [](double v) { return v > 0; });
  return logs ? std::expm1(value) : value;
}

// Groups paired by seed: the mean change across pairs against the threshold, significant by the
// paired t test after Holm.
Verdict judge_paired(const SampledMetric& metric, const SampleEvidence& evidence, double alpha) {
  Verdict verdict =
      base_verdict(metric.name, statistic_of(metric.a, metric.statistic), statistic_of(metric.b, metric.statistic));
  const PairedTest& test = *evidence.paired;
  const double change = paired_change(metric, test.mean);
  const double worse = metric.direction == Direction::higher_is_better ? -change : change;
  const double tolerance = metric.threshold.tolerance();
  verdict.threshold_crossed = worse > tolerance;
  const bool significant = evidence.adjusted_p <= alpha;
  const std::string limit = metric.threshold.to_string();
  const std::string what = fmt::format(
      "{} across {} seed pairs (95 % CI {} to {})", change_text(change, metric.threshold), test.pairs,
      change_text(paired_change(metric, test.low), metric.threshold),
      change_text(paired_change(metric, test.high), metric.threshold));
  const std::string p_text = significance_text(to_string(evidence.decided_by), evidence.p_value, evidence.adjusted_p,
                                               evidence.level, evidence.alpha, evidence.family);
  if (significant && worse > tolerance) {
    verdict.status = Status::regression;
    verdict.reason = fmt::format("{} is worse beyond threshold {} and significant ({})", what, limit, p_text);
  } else if (significant && worse < -tolerance) {
    verdict.status = Status::improvement;
    verdict.reason = fmt::format("{} is better beyond threshold {} and significant ({})", what, limit, p_text);
  } else if (significant) {
    verdict.reason = fmt::format("{} is significant ({}) but within threshold {}", what, p_text, limit);
  } else if (std::fabs(worse) > tolerance) {
    verdict.reason = fmt::format("{} is beyond threshold {} but not significant ({}): more seeds would tell", what,
                                 limit, p_text);
  } else {
    verdict.reason = fmt::format("{} is within threshold {} ({})", what, limit, p_text);
  }
  verdict.evidence = evidence;
  return verdict;
}

Verdict too_few_pairs(const SampledMetric& metric, size_t min_pairs) {
  Verdict verdict =
      base_verdict(metric.name, statistic_of(metric.a, metric.statistic), statistic_of(metric.b, metric.statistic));
  verdict.status = Status::too_few_samples;
  verdict.reason = fmt::format("too few samples: {} seed pair{} (at least {} are needed to conclude)", metric.a.size(),
                               metric.a.size() == 1 ? "" : "s", min_pairs);
  return verdict;
}

bool enough(const SampledMetric& metric, const SampleOptions& options) {
  if (metric.paired) {
    return metric.a.size() >= std::max<size_t>(2, options.min_pairs) && pair_differences(metric).size() >= 2;
  }
  return !metric.a.empty() && !metric.b.empty() && metric.a.size() >= options.min_samples &&
         metric.b.size() >= options.min_samples;
}

}  // namespace

std::string_view to_string(Direction direction) {
  return direction == Direction::higher_is_better ? "higher" : "lower";
}

std::optional<Direction> parse_direction(std::string_view text) {
  if (text == "higher")
    return Direction::higher_is_better;
  if (text == "lower")
    return Direction::lower_is_better;
  return std::nullopt;
}

double Threshold::tolerance() const {
  // Percent and points both scale by 1/100; only the reference differs (A vs. the whole range).
  return unit == ThresholdUnit::absolute ? amount : amount / 100.0;
}

std::string Threshold::to_string() const {
  const std::string_view sign_text = sign == ThresholdSign::plus ? "+" : sign == ThresholdSign::minus ? "-" : "";
  std::string_view suffix;
  for (const UnitSuffix& entry : k_unit_suffixes) {
    if (entry.unit == unit)
      suffix = entry.suffix;
  }
  // {} is the shortest spelling that reads back to the same double.
  return fmt::format("{}{}{}", sign_text, amount, suffix);
}

util::Expected<Threshold> try_parse_threshold(std::string_view text) {
  std::string_view rest = util::trim(text);
  Threshold threshold;
  if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
    threshold.sign = rest.front() == '+' ? ThresholdSign::plus : ThresholdSign::minus;
    rest.remove_prefix(1);
  }
  threshold.unit = ThresholdUnit::absolute;
  for (const UnitSuffix& entry : k_unit_suffixes) {
    if (rest.ends_with(entry.suffix)) {
      threshold.unit = entry.unit;
      rest.remove_suffix(entry.suffix.size());
      break;
    }
  }
  const std::optional<double> amount = parse_unsigned_number(rest);
  if (!amount) {
    return tl::unexpected(bad_threshold(text));
  }
  threshold.amount = *amount;
  return threshold;
}

Threshold parse_threshold(std::string_view text) {
  util::Expected<Threshold> threshold = try_parse_threshold(text);
  if (!threshold) {
    throw util::CompareError(threshold.error().message);
  }
  return *threshold;
}

Threshold threshold_from_number(double value) {
  EXPCTL_CHECK(std::isfinite(value), util::CompareError, "invalid threshold {}: {}", value, k_threshold_forms);
  Threshold threshold;
  threshold.unit = ThresholdUnit::absolute;
  threshold.sign = std::signbit(value) ? ThresholdSign::minus : ThresholdSign::none;
  threshold.amount = std::fabs(value);
  return threshold;
}

ThresholdOverride parse_threshold_override(std::string_view option) {
  const size_t equals = option.find('=');
  EXPCTL_CHECK(equals != std::string_view::npos && equals > 0, util::CompareError,
               "--threshold {}: expected NAME=VALUE, e.g. samples_per_sec=-5%", util::quoted(option));
  const std::string_view name = util::trim(option.substr(0, equals));
  util::Expected<Threshold> threshold = try_parse_threshold(option.substr(equals + 1));
  EXPCTL_CHECK(threshold.has_value(), util::CompareError, "--threshold {}: {}", util::quoted(option),
               threshold ? std::string() : threshold.error().message);
  return ThresholdOverride{std::string(name), *threshold};
}

void check_threshold_direction(std::string_view metric, const Threshold& threshold, Direction direction) {
  const bool higher = direction == Direction::higher_is_better;
  const ThresholdSign wrong = higher ? ThresholdSign::plus : ThresholdSign::minus;
  Threshold fixed = threshold;
  fixed.sign = higher ? ThresholdSign::minus : ThresholdSign::plus;
  EXPCTL_CHECK(threshold.sign != wrong, util::CompareError,
               "threshold {} for {} points the wrong way: {} is better, so a regression is a {}; write {}",
               util::quoted(threshold.to_string()), util::quoted(metric), to_string(direction),
               higher ? "drop" : "rise", util::quoted(fixed.to_string()));
}

std::string_view to_string(Statistic statistic) {
  switch (statistic) {
    case Statistic::value:
      return "value";
    case Statistic::median:
      return "median";
    case Statistic::p95:
      return "p95";
  }
  return "value";
}

const MetricInfo* find_metric(std::string_view name) {
  for (const MetricInfo& metric : k_metrics) {
    if (metric.name == name)
      return &metric;
  }
  return nullptr;
}

Threshold default_threshold(const MetricInfo& metric) {
  util::Expected<Threshold> threshold = try_parse_threshold(metric.default_threshold);
  EXPCTL_ASSERT(threshold.has_value(), "default threshold of {} does not parse", metric.name);
  return *threshold;
}

std::string_view to_string(SignificanceTest test) {
  switch (test) {
    case SignificanceTest::mann_whitney:
      return "mann-whitney";
    case SignificanceTest::bootstrap:
      return "bootstrap";
    case SignificanceTest::paired_t:
      return "paired-t";
  }
  return "mann-whitney";
}

std::string significance_text(std::string_view test, double p_value, double adjusted_p, double level, double alpha,
                              size_t family) {
  const std::string correction = family <= 1 ? fmt::format("one metric at level {:g}", alpha)
                                             : fmt::format("Holm over {} metrics at level {:g}", family, alpha);
  if (p_value > level) {
    return fmt::format("{} p = {:.3g} > {:.2g}, {}", test, p_value, level, correction);
  }
  if (adjusted_p <= alpha) {
    return fmt::format("{} p = {:.3g} <= {:.2g}, {}", test, p_value, level, correction);
  }
  return fmt::format("{} p = {:.3g} <= {:.2g}, but a smaller p failed first (Holm-adjusted {:.3g} > {:g}), {}", test,
                     p_value, level, adjusted_p, alpha, correction);
}

std::string_view to_string(Status status) {
  switch (status) {
    case Status::ok:
      return "ok";
    case Status::regression:
      return "regression";
    case Status::improvement:
      return "improvement";
    case Status::too_few_samples:
      return "too few samples";
    case Status::inconclusive:
      return "inconclusive";
  }
  return "ok";
}

Verdict judge_values(std::string_view metric, double a, double b, const Threshold& threshold, Direction direction) {
  if (std::optional<Verdict> verdict = judge_non_finite(metric, a, b)) {
    return *verdict;
  }
  Verdict verdict = base_verdict(metric, a, b);
  const Crossing crossed = crossing(a, b, threshold, direction);
  verdict.threshold_crossed = crossed.worse;
  const std::string limit = threshold.to_string();
  if (verdict.threshold_crossed) {
    verdict.status = Status::regression;
    verdict.reason = fmt::format("worse beyond threshold {}", limit);
  } else if (crossed.better) {
    verdict.status = Status::improvement;
    verdict.reason = fmt::format("better beyond threshold {}", limit);
  } else {
    verdict.reason = fmt::format("within threshold {}", limit);
  }
  return verdict;
}

std::vector<Verdict> judge_samples(std::span<const SampledMetric> metrics, const SampleOptions& options) {
  std::vector<std::optional<SampleEvidence>> evidence(metrics.size());
  std::vector<double> p_values;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const SampledMetric& metric = metrics[i];
    check_samples_finite(metric);
    EXPCTL_ASSERT(!metric.paired || metric.a.size() == metric.b.size(), "metric {}: {} pairs against {}",
                  metric.name, metric.a.size(), metric.b.size());
    if (!enough(metric, options)) {
      continue;
    }
    SampleEvidence& tested = evidence[i].emplace();
    if (metric.paired) {
      tested.decided_by = SignificanceTest::paired_t;
      tested.paired = paired_t_test(pair_differences(metric));
      tested.p_value = tested.paired->p_value;
      tested.change = paired_change(metric, tested.paired->mean);
      tested.change_low = paired_change(metric, tested.paired->low);
      tested.change_high = paired_change(metric, tested.paired->high);
      p_values.push_back(tested.p_value);
      continue;
    }
    tested.test = mann_whitney_u(metric.a, metric.b);
    BootstrapOptions bootstrap = options.bootstrap;
    bootstrap.seed ^= name_hash(metric.name);
    const double q = metric.statistic == Statistic::p95 ? 95 : 50;
    tested.ratio = bootstrap_ratio(metric.a, metric.b, q, bootstrap);
    tested.p_value = tested.test.p_value;
    if (metric.statistic == Statistic::p95) {
      tested.decided_by = SignificanceTest::bootstrap;
      // An undefined ratio (zeros in A) leaves no evidence about the tail: not significant.
      tested.p_value = tested.ratio ? tested.ratio->p_value : 1.0;
    }
    p_values.push_back(tested.p_value);
  }

  const std::vector<double> adjusted = holm_adjust(p_values);
  const std::vector<double> levels = holm_levels(p_values, options.alpha);
  std::vector<Verdict> verdicts;
  verdicts.reserve(metrics.size());
  size_t next_adjusted = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    if (!evidence[i]) {
      verdicts.push_back(metrics[i].paired ? too_few_pairs(metrics[i], options.min_pairs)
                                           : too_few(metrics[i], options.min_samples));
      continue;
    }
    evidence[i]->level = levels[next_adjusted];
    evidence[i]->alpha = options.alpha;
    evidence[i]->family = p_values.size();
    evidence[i]->adjusted_p = adjusted[next_adjusted++];
    verdicts.push_back(metrics[i].paired ? judge_paired(metrics[i], *evidence[i], options.alpha)
                                         : judge_tested(metrics[i], *evidence[i], options.alpha));
  }
  return verdicts;
}

}  // namespace expctl::compare
