#pragma once
/// The nightly's own records: the tags on the runs a night makes, and the runs a night is judged
/// against (docs/nightly.md, "Baselines").

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/store/types.hpp"

namespace expctl::nightly {

inline constexpr std::string_view k_night_tag = "nightly:";                    ///< a candidate run of night D
inline constexpr std::string_view k_night_baseline_tag = "nightly-baseline:";  ///< an A/B baseline run of D
inline constexpr std::string_view k_confirm_tag = "nightly-confirm:";          ///< a confirmation run of D
inline constexpr std::string_view k_failed_tag = "nightly-fail:";              ///< a candidate of a night that failed
/// A candidate (or rerun) of the suite entry <suite>/<name> (compare::SuiteEntry::identity),
/// whatever its spec hash: the entry's baseline follows it across spec and file changes.
inline constexpr std::string_view k_entry_tag = "nightly-entry:";

/// The night (YYYY-MM-DD) of a run's tag with `prefix`; empty when it has none.
std::string night_of(const store::RunRecord& run, std::string_view prefix);

/// True when the run carries a k_failed_tag.
bool from_failed_night(const store::RunRecord& run);

/// The rolling baseline: the completed runs tagged nightly:<d> of the `nights` most recent
/// nights d before `date`, leaving out runs of a night that failed (a regression never becomes
/// the baseline by waiting). `runs` are one configuration's; order is kept.
std::vector<store::RunRecord> rolling_baseline(std::span<const store::RunRecord> runs, std::string_view date,
                                               int nights);

/// The distinct nights of `runs` (tag nightly:), newest first.
std::vector<std::string> nights_of(std::span<const store::RunRecord> runs);

/// Completed runs with a tag `prefix` + `date`.
std::vector<store::RunRecord> runs_of_night(std::span<const store::RunRecord> runs, std::string_view prefix,
                                            std::string_view date);

}  // namespace expctl::nightly
