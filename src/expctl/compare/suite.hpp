#pragma once
/// A nightly suite (`expctl nightly SUITE.yaml`) and how one night of it is graded
/// (docs/nightly.md):
///
///   suite: nightly              # name, used in the JUnit XML and the Markdown summary
///   repeat: 5                   # defaults for every entry (each may set its own)
///   confirm_rounds: 3
///   baseline_nights: 5
///   specs:
///     - spec: tiny-synthetic.yaml   # relative to the suite file's directory
///       name: tiny                  # optional: the entry's identity (default: the spec file's name)
///       set: [train.max_steps=40]   # optional --set overrides
///       repeat: 5                   # runs per night (default 1; `repeats` is the older spelling)
///       confirm_rounds: 3           # reruns of a suspected timing regression (default 3; 0: fail at once)
///       baseline_nights: 5          # rolling baseline: the entry's runs of its last K nights (default 5)
///       baseline:                   # optional: an A/B entry, judged against this configuration tonight
///         spec: tiny-synthetic.yaml
///         set: [model.hidden_sizes=[32]]
///       thresholds:                 # fail thresholds, over the spec's `regression:` block
///         samples_per_sec: -10%
///       warn:                       # warn thresholds: worse than these, within `thresholds`: warn
///         samples_per_sec: -5%
///
/// Thresholds live in versioned files only: the spec's `regression:` block, then the suite's
/// `thresholds:`; `expctl nightly` takes no --threshold.

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/thresholds.hpp"
#include "expctl/store/types.hpp"

namespace expctl::compare {

inline constexpr int k_default_repeat = 1;
inline constexpr int k_default_confirm_rounds = 3;
inline constexpr int k_default_baseline_nights = 5;

/// A configuration to run: a spec file and its --set overrides.
struct SuiteConfig {
  std::filesystem::path spec;  ///< resolved against the suite file's directory
  std::vector<std::string> overrides;
};

/// One entry of a suite.
struct SuiteEntry {
  std::filesystem::path spec;  ///< resolved against the suite file's directory
  int repeats = k_default_repeat;
  std::vector<std::string> overrides;  ///< "key.path=value", as --set
  int confirm_rounds = k_default_confirm_rounds;
  int baseline_nights = k_default_baseline_nights;
  /// An A/B entry: both configurations run interleaved each night and the baseline is tonight's
  /// runs of this one. Without it the baseline is the entry's own runs (pinned or rolling).
  std::optional<SuiteConfig> baseline;
  std::vector<ThresholdOverride> thresholds;  ///< fail thresholds (over the spec's regression block)
  std::vector<ThresholdOverride> warn;        ///< warn thresholds, each inside its fail threshold
  std::string where;                          ///< "suite.yaml: specs[0]", for errors found later
  /// The entry's identity, kept across changes of its spec and files: "<suite>/<name>", the name
  /// being the entry's `name:` or its spec file's name. Its runs are tagged nightly-entry:<identity>
  /// and its rolling baseline follows it (docs/nightly.md, "Entries have an identity").
  std::string identity;
};

/// A parsed suite.
struct Suite {
  std::string name;
  std::vector<SuiteEntry> specs;
};

/// Reads a suite file. Throws util::CompareError (exit 2) naming the file, the entry and the fix.
Suite load_suite(const std::filesystem::path& file);

/// The fail threshold of `metric` for an entry whose candidate spec has `spec_values`: the
/// suite's, else the spec's `regression:` block, else the metric table's default.
Threshold fail_threshold(const SuiteEntry& entry, const MetricInfo& metric, const nlohmann::json& spec_values);

/// Throws util::CompareError when a warn threshold is not strictly inside its fail threshold (or
/// is written in another unit): such a warn band could never warn.
void check_warn_thresholds(const SuiteEntry& entry, const nlohmann::json& spec_values);

}  // namespace expctl::compare
