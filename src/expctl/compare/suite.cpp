#include "expctl/compare/suite.hpp"

#include <algorithm>
#include <map>

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
  check_keys(place, node,
             {"spec", "name", "set", "repeat", "repeats", "confirm_rounds", "baseline_nights", "baseline", "thresholds",
              "warn"});
  SuiteEntry entry;
  entry.where = fmt::format("{}: {}", file.string(), place.where);
  entry.spec = file.parent_path() / node["spec"].as<std::string>();
  entry.identity = entry.spec.filename().string();  // the suite's name goes before it in parse_suite
  if (const auto name = node["name"]) {
    const std::string text = name.IsScalar() ? name.as<std::string>() : std::string();
    if (text.empty() || std::any_of(text.begin(), text.end(), [](char c) {
          return c == ',' || c == '/' || static_cast<unsigned char>(c) <= ' ' || c == '\x7f';
        })) {
      place.at(".name").fail(": a non-empty name without spaces, commas or slashes, e.g. `name: resnet-fp32`");
    }
    entry.identity = text;
  }
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
  std::map<std::string, size_t> identities;  // identity -> the first entry that has it
  for (const auto& node : root["specs"]) {
    SuiteEntry entry = parse_entry(file, node, index, defaults);
    if (const auto [first, inserted] = identities.emplace(entry.identity, index); !inserted) {
      bad_suite(file, fmt::format("specs[{}] and specs[{}] are both entry \"{}\": give each a `name:` of its own "
                                  "(an entry's nights are judged against its own earlier nights by that name)",
                                  first->second, index, entry.identity));
    }
    entry.identity = suite.name + "/" + entry.identity;
    suite.specs.push_back(std::move(entry));
    ++index;
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

}  // namespace expctl::compare
