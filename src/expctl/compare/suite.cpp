#include "expctl/compare/suite.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

constexpr const char* k_suite_shape =
    "a suite has `suite: NAME` and `specs:`, a list of {spec: FILE, set: [key=value], repeat: N, "
    "confirm_rounds: N, baseline_nights: K, baseline: {spec, set}, thresholds: {metric: value}, warn: {...}}";

[[noreturn]] void bad_suite(const std::filesystem::path& file, std::string_view why) {
  throw util::CompareError(fmt::format("{}: {} ({})", file.string(), why, k_suite_shape));
}

// Where a problem is, for its one line: the file, and the entry's key path.
struct Place {
  const std::filesystem::path& file;
  std::string where;

  [[noreturn]] void fail(std::string_view why) const {
    std::string text = where + std::string(why);
    while (!text.empty() && (text.front() == ':' || text.front() == ' ' || text.front() == '.')) {
      text.erase(0, 1);  // a problem of the file's top level has no key path in front
    }
    throw util::CompareError(fmt::format("{}: {}", file.string(), text));
  }
  Place at(std::string_view key) const { return {file, where + std::string(key)}; }
};

int whole_number(const Place& place, const YAML::Node& node, int low, int high) {
  int value = 0;
  if (!node.IsScalar() || !YAML::convert<int>::decode(node, value) || value < low || value > high) {
    place.fail(fmt::format(" must be a whole number from {} to {}", low, high));
  }
  return value;
}

std::vector<std::string> string_list(const Place& place, const YAML::Node& node) {
  if (!node.IsSequence()) {
    place.fail(" must be a list of key.path=value");
  }
  std::vector<std::string> items;
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      place.fail(" must be a list of key.path=value");
    }
    items.push_back(item.as<std::string>());
  }
  return items;
}

// A mapping's key as text; a list or mapping as a key (`? [x]`, `{[a]: 1}`) is refused (found by
// fuzz_suite: yaml-cpp's bad-conversion exception escaped load_suite).
std::string key_text(const Place& place, const YAML::Node& key) {
  if (!key.IsScalar()) {
    place.fail(": a key must be a plain name, not a list or a mapping");
  }
  return key.Scalar();
}

void check_keys(const Place& place, const YAML::Node& node, std::initializer_list<std::string_view> known) {
  for (const auto& key : node) {
    const auto name = key_text(place, key.first);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      place.fail(fmt::format(": unknown key '{}' (known: {})", name, fmt::join(known, ", ")));
    }
  }
}

std::string known_metrics() {
  std::vector<std::string_view> names;
  for (const auto& metric : k_metrics) {
    names.push_back(metric.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

ThresholdOverride parse_one_threshold(const Place& place, const std::string& metric, const YAML::Node& value) {
  const MetricInfo* info = find_metric(metric);
  if (info == nullptr) {
    place.fail(fmt::format(".{}: unknown metric (known: {})", metric, known_metrics()));
  }
  const auto parsed = value.IsScalar() ? try_parse_threshold(value.as<std::string>())
                                       : util::Expected<Threshold>(util::make_error("not a scalar"));
  if (!parsed) {
    place.fail(fmt::format(".{}: {}", metric, parsed.error().message));
  }
  try {
    check_threshold_direction(metric, *parsed, info->direction);
  } catch (const util::CompareError& error) {
    place.fail(fmt::format(".{}: {}", metric, error.what()));
  }
  return {metric, *parsed};
}

std::vector<ThresholdOverride> threshold_map(const Place& place, const YAML::Node& node) {
  if (!node.IsMap()) {
    place.fail(" must be a map of metric: threshold, e.g. {samples_per_sec: -5%}");
  }
  std::vector<ThresholdOverride> thresholds;
  for (const auto& item : node) {
    thresholds.push_back(parse_one_threshold(place, key_text(place, item.first), item.second));
  }
  return thresholds;
}

SuiteConfig parse_config(const Place& place, const std::filesystem::path& file, const YAML::Node& node) {
  if (!node.IsMap() || !node["spec"] || !node["spec"].IsScalar()) {
    place.fail(" needs `spec: FILE`");
  }
  check_keys(place, node, {"spec", "set"});
  SuiteConfig config{file.parent_path() / node["spec"].as<std::string>(), {}};
  if (const auto overrides = node["set"]) {
    config.overrides = string_list(place.at(".set"), overrides);
  }
  return config;
}

// The suite-wide defaults an entry starts from.
struct Defaults {
  int repeat = k_default_repeat;
  int confirm_rounds = k_default_confirm_rounds;
  int baseline_nights = k_default_baseline_nights;
};

int repeat_of(const Place& place, const YAML::Node& node, int fallback) {
  if (node["repeat"] && node["repeats"]) {
    place.fail(": give `repeat` or its older spelling `repeats`, not both");
  }
  const auto value = node["repeat"] ? node["repeat"] : node["repeats"];
  return value ? whole_number(place.at(node["repeat"] ? ".repeat" : ".repeats"), value, 1, 100) : fallback;
}

void parse_counts(const Place& place, const YAML::Node& node, const Defaults& defaults, SuiteEntry& entry) {
  entry.repeats = repeat_of(place, node, defaults.repeat);
  entry.confirm_rounds = node["confirm_rounds"]
                             ? whole_number(place.at(".confirm_rounds"), node["confirm_rounds"], 0, 20)
                             : defaults.confirm_rounds;
  entry.baseline_nights = node["baseline_nights"]
                              ? whole_number(place.at(".baseline_nights"), node["baseline_nights"], 1, 60)
                              : defaults.baseline_nights;
}

void check_warn_inside_suite(const Place& place, const SuiteEntry& entry) {
  for (const auto& warn : entry.warn) {
    for (const auto& fail : entry.thresholds) {
      if (fail.metric == warn.metric &&
          (fail.threshold.unit != warn.threshold.unit || warn.threshold.tolerance() >= fail.threshold.tolerance())) {
        place.fail(fmt::format(".warn.{}: {} must be inside its fail threshold {} (same unit, smaller)", warn.metric,
                               warn.threshold.to_string(), fail.threshold.to_string()));
      }
    }
  }
}

SuiteEntry parse_entry(const std::filesystem::path& file, const YAML::Node& node, size_t index,
                       const Defaults& defaults) {
  const Place place{file, fmt::format("specs[{}]", index)};
  if (!node.IsMap() || !node["spec"] || !node["spec"].IsScalar()) {
    place.fail(" needs `spec: FILE`");
  }
  check_keys(
      place, node,
      {"spec", "set", "repeat", "repeats", "confirm_rounds", "baseline_nights", "baseline", "thresholds", "warn"});
  SuiteEntry entry;
  entry.where = fmt::format("{}: {}", file.string(), place.where);
  entry.spec = file.parent_path() / node["spec"].as<std::string>();
  if (const auto overrides = node["set"]) {
    entry.overrides = string_list(place.at(".set"), overrides);
  }
  parse_counts(place, node, defaults, entry);
  if (const auto baseline = node["baseline"]) {
    entry.baseline = parse_config(place.at(".baseline"), file, baseline);
  }
  if (const auto thresholds = node["thresholds"]) {
    entry.thresholds = threshold_map(place.at(".thresholds"), thresholds);
  }
  if (const auto warn = node["warn"]) {
    entry.warn = threshold_map(place.at(".warn"), warn);
  }
  check_warn_inside_suite(place, entry);
  return entry;
}

Defaults parse_defaults(const std::filesystem::path& file, const YAML::Node& root) {
  const Place place{file, ""};
  check_keys(place, root, {"suite", "specs", "repeat", "repeats", "confirm_rounds", "baseline_nights"});
  Defaults defaults;
  SuiteEntry counts;
  parse_counts(place, root, defaults, counts);
  return {counts.repeats, counts.confirm_rounds, counts.baseline_nights};
}

// The spec loader's limit (spec/yaml_tree.hpp): a suite is a few kilobytes.
constexpr std::uintmax_t k_max_suite_bytes = std::uintmax_t{1024} * 1024;

YAML::Node read_yaml(const std::filesystem::path& file) {
  if (!std::filesystem::is_regular_file(file)) {
    throw util::CompareError(fmt::format("{}: no such suite file", file.string()));
  }
  std::error_code size_error;
  if (const auto size = std::filesystem::file_size(file, size_error); !size_error && size > k_max_suite_bytes) {
    bad_suite(file, fmt::format("{} bytes, more than the 1 MiB limit", size));
  }
  try {
    return YAML::LoadFile(file.string());
  } catch (const YAML::Exception& error) {
    bad_suite(file, fmt::format("not valid YAML: {}", error.msg));
  }
}

Suite parse_suite(const std::filesystem::path& file, const YAML::Node& root) {
  if (!root.IsMap() || !root["specs"] || !root["specs"].IsSequence() || root["specs"].size() == 0) {
    bad_suite(file, "needs a non-empty `specs:` list");
  }
  const Defaults defaults = parse_defaults(file, root);
  Suite suite;
  suite.name = root["suite"] && root["suite"].IsScalar() ? root["suite"].as<std::string>() : file.stem().string();
  size_t index = 0;
  for (const auto& node : root["specs"]) {
    suite.specs.push_back(parse_entry(file, node, index++, defaults));
  }
  return suite;
}

}  // namespace

Suite load_suite(const std::filesystem::path& file) {
  try {
    return parse_suite(file, read_yaml(file));
  } catch (const YAML::Exception& error) {
    // Every conversion is checked above; this keeps any one that is not a one-line error too.
    bad_suite(file, fmt::format("not a valid suite: {}", error.msg));
  }
}

Threshold fail_threshold(const SuiteEntry& entry, const MetricInfo& metric, const nlohmann::json& spec_values) {
  for (const auto& override_ : entry.thresholds) {
    if (override_.metric == metric.name) {
      return override_.threshold;
    }
  }
  const auto block = spec_values.find("regression");
  if (block != spec_values.end() && block->is_object()) {
    const auto written = block->find(std::string(metric.name));
    if (written != block->end() && written->is_string()) {
      return parse_threshold(written->get<std::string>());
    }
    if (written != block->end() && written->is_number()) {
      return threshold_from_number(written->get<double>());
    }
  }
  return default_threshold(metric);
}

void check_warn_thresholds(const SuiteEntry& entry, const nlohmann::json& spec_values) {
  for (const auto& warn : entry.warn) {
    const Threshold fail = fail_threshold(entry, *find_metric(warn.metric), spec_values);
    if (fail.unit != warn.threshold.unit || warn.threshold.tolerance() >= fail.tolerance()) {
      throw util::CompareError(fmt::format(
          "{}.warn.{}: {} must be inside its fail threshold {} (from the spec's regression block or the default; "
          "same unit, smaller): tighten the warn threshold or set the fail threshold in `thresholds:`",
          entry.where, warn.metric, warn.threshold.to_string(), fail.to_string()));
    }
  }
}

// ---------------------------------------------------------------------------------------------

std::string night_of(const store::RunRecord& run, std::string_view prefix) {
  for (const auto& tag : run.tags) {
    if (tag.starts_with(prefix)) {
      return tag.substr(prefix.size());
    }
  }
  return {};
}

bool from_failed_night(const store::RunRecord& run) {
  return !night_of(run, k_failed_tag).empty();
}

std::vector<std::string> nights_of(std::span<const store::RunRecord> runs) {
  std::vector<std::string> nights;
  for (const auto& run : runs) {
    if (const std::string night = night_of(run, k_night_tag); !night.empty()) {
      nights.push_back(night);
    }
  }
  std::sort(nights.begin(), nights.end(), std::greater<>());
  nights.erase(std::unique(nights.begin(), nights.end()), nights.end());
  return nights;
}

std::vector<store::RunRecord> runs_of_night(std::span<const store::RunRecord> runs, std::string_view prefix,
                                            std::string_view date) {
  std::vector<store::RunRecord> selected;
  for (const auto& run : runs) {
    if (run.status == store::RunStatus::completed && night_of(run, prefix) == date) {
      selected.push_back(run);
    }
  }
  return selected;
}

std::vector<store::RunRecord> rolling_baseline(std::span<const store::RunRecord> runs, std::string_view date,
                                               int nights) {
  std::vector<store::RunRecord> usable;
  for (const auto& run : runs) {
    const std::string night = night_of(run, k_night_tag);
    if (!night.empty() && night < date && run.status == store::RunStatus::completed && !from_failed_night(run)) {
      usable.push_back(run);
    }
  }
  const auto recent = nights_of(usable);
  const size_t kept = std::min(recent.size(), static_cast<size_t>(std::max(nights, 0)));
  std::erase_if(usable, [&](const store::RunRecord& run) {
    return std::find(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(kept), night_of(run, k_night_tag)) ==
           recent.begin() + static_cast<std::ptrdiff_t>(kept);
  });
  return usable;
}

// ---------------------------------------------------------------------------------------------
// Grading.

namespace {

bool is_timing(std::string_view metric) {
  const MetricInfo* info = find_metric(metric);
  return info != nullptr && info->timing;
}

const MetricRow* row_of(const Comparison& comparison, std::string_view metric) {
  for (const auto& row : comparison.metrics) {
    if (row.verdict.metric == metric) {
      return &row;
    }
  }
  return nullptr;
}

std::string status_reason(const MetricRow* row) {
  return row == nullptr ? std::string("no value in the reruns")
                        : fmt::format("{}: {}", to_string(row->verdict.status), row->verdict.reason);
}

// A timing regression of the first comparison: fails only once the reruns show it again.
MetricGrade suspected(const MetricRow& row, const Comparison& first, const Confirmation& confirmation) {
  const std::string& name = row.verdict.metric;
  const std::string& reason = row.verdict.reason;
  if (correctness_failed(first)) {
    return {name, Grade::warn, reason + "; not rerun: the night already fails on a correctness check"};
  }
  if (confirmation.rounds == 0) {
    return {name, Grade::fail, reason + " (confirm_rounds: 0: failed without rerun)"};
  }
  if (confirmation.comparison == nullptr) {
    return {name, Grade::warn, fmt::format("{}; not confirmed: {}", reason, confirmation.missing)};
  }
  const MetricRow* again = row_of(*confirmation.comparison, name);
  if (again != nullptr && again->verdict.status == Status::regression) {
    return {name, Grade::fail, fmt::format("confirmed by {}: {}", confirmation.label, again->verdict.reason)};
  }
  return {name, Grade::warn,
          fmt::format("{}; not confirmed by {} ({})", reason, confirmation.label, status_reason(again))};
}

// A metric within its fail threshold may still be beyond its warn threshold.
MetricGrade warn_band(const MetricRow& row, const Comparison* warn_view) {
  const MetricRow* warned = warn_view == nullptr ? nullptr : row_of(*warn_view, row.verdict.metric);
  if (warned == nullptr || warned->verdict.status != Status::regression) {
    return {row.verdict.metric, Grade::pass, ""};
  }
  return {row.verdict.metric, Grade::warn,
          fmt::format("beyond warn threshold {} (fails beyond {}): {}", warned->threshold.to_string(),
                      row.threshold.to_string(), warned->verdict.reason)};
}

MetricGrade grade_row(const MetricRow& row, const Comparison& first, const Comparison* warn_view,
                      const Confirmation& confirmation) {
  switch (row.verdict.status) {
    case Status::regression:
      return is_timing(row.verdict.metric) ? suspected(row, first, confirmation)
                                           : MetricGrade{row.verdict.metric, Grade::fail, row.verdict.reason};
    case Status::inconclusive:
      return {row.verdict.metric, Grade::warn, "inconclusive: " + row.verdict.reason};
    default:
      return warn_band(row, warn_view);
  }
}

Grade worst(const EntryGrade& grade) {
  Grade result = Grade::pass;
  for (const auto& metric : grade.metrics) {
    result = std::max(result, metric.grade);
  }
  return result;
}

std::vector<std::string> names_graded(const EntryGrade& grade, Grade wanted) {
  std::vector<std::string> names;
  for (const auto& metric : grade.metrics) {
    if (metric.grade == wanted) {
      names.push_back(metric.metric);
    }
  }
  return names;
}

std::string fail_line(const EntryGrade& grade, const Comparison& first, const Confirmation& confirmation) {
  if (correctness_failed(first)) {
    return fmt::format("fail: {} (correctness fails without rerun)", first.verdict_line());
  }
  if (const MetricGrade* reruns = grade.find("confirmation"); reruns != nullptr && grade.confirmed.empty()) {
    return "fail: " + reruns->reason;
  }
  if (!grade.confirmed.empty()) {
    return fmt::format("fail: regression in {} confirmed by {}", fmt::join(grade.confirmed, ", "), confirmation.label);
  }
  const auto failed = names_graded(grade, Grade::fail);
  return fmt::format("fail: regression in {}{}", fmt::join(failed, ", "),
                     confirmation.rounds == 0 ? " (confirm_rounds: 0)" : "");
}

std::string warn_line(const EntryGrade& grade) {
  const auto warned = names_graded(grade, Grade::warn);
  const MetricGrade* first = grade.find(warned.front());
  std::string line = fmt::format("warn: {}: {}", first->metric, first->reason);
  if (warned.size() > 1) {
    line += fmt::format(" (also {})", fmt::join(warned.begin() + 1, warned.end(), ", "));
  }
  return line;
}

// The reruns may fail a correctness check of their own (a rerun that does not reproduce).
void grade_reruns(EntryGrade& grade, const Confirmation& confirmation) {
  if (confirmation.comparison != nullptr && correctness_failed(*confirmation.comparison)) {
    grade.metrics.push_back({"confirmation", Grade::fail,
                             fmt::format("the {}: {}", confirmation.label, confirmation.comparison->verdict_line())});
  }
}

}  // namespace

std::string_view to_string(Grade grade) {
  switch (grade) {
    case Grade::pass:
      return "pass";
    case Grade::warn:
      return "warn";
    case Grade::fail:
      return "fail";
  }
  return "pass";
}

const MetricGrade* EntryGrade::find(std::string_view metric) const {
  const auto found =
      std::find_if(metrics.begin(), metrics.end(), [&](const MetricGrade& item) { return item.metric == metric; });
  return found == metrics.end() ? nullptr : &*found;
}

std::vector<std::string> timing_regressions(const Comparison& comparison) {
  std::vector<std::string> names;
  for (const auto& row : comparison.metrics) {
    if (row.verdict.status == Status::regression && is_timing(row.verdict.metric)) {
      names.push_back(row.verdict.metric);
    }
  }
  return names;
}

bool correctness_failed(const Comparison& comparison) {
  return !comparison.reproducibility.identical ||
         std::any_of(comparison.metrics.begin(), comparison.metrics.end(), [](const MetricRow& row) {
           return row.verdict.status == Status::regression && !is_timing(row.verdict.metric);
         });
}

bool needs_confirmation(const Comparison& first) {
  return first.outcome == Outcome::regression && !correctness_failed(first) && !timing_regressions(first).empty();
}

std::vector<NoiseNote> noise_floor_notes(const Comparison& comparison) {
  std::vector<NoiseNote> notes;
  for (const auto& row : comparison.metrics) {
    if (!row.verdict.run_evidence) {
      continue;
    }
    if (auto line = threshold_below_noise(row.verdict.metric, row.threshold, row.verdict.run_evidence->noise)) {
      notes.push_back({row.verdict.metric, *line + " (in the suite: the entry's `thresholds:` or `repeat:`)"});
    }
  }
  return notes;
}

EntryGrade grade_entry(const Comparison& first, const Comparison* warn_view, const Confirmation& confirmation) {
  EntryGrade grade;
  grade.notes = noise_floor_notes(first);
  if (first.outcome == Outcome::not_comparable) {
    grade.grade = Grade::fail;
    grade.line = "fail: " + first.verdict_line();
    return grade;
  }
  for (const auto& row : first.metrics) {
    grade.metrics.push_back(grade_row(row, first, warn_view, confirmation));
    if (grade.metrics.back().grade == Grade::fail && is_timing(row.verdict.metric) && confirmation.rounds > 0) {
      grade.confirmed.push_back(row.verdict.metric);
    }
  }
  grade_reruns(grade, confirmation);
  grade.grade = first.reproducibility.identical ? worst(grade) : Grade::fail;
  grade.line = grade.grade == Grade::fail   ? fail_line(grade, first, confirmation)
               : grade.grade == Grade::warn ? warn_line(grade)
                                            : "pass: " + first.verdict_line();
  return grade;
}

void label_suite_thresholds(Comparison& comparison) {
  for (auto& row : comparison.metrics) {
    if (row.threshold_origin == "--threshold") {
      row.threshold_origin = "suite";
    }
  }
}

}  // namespace expctl::compare
