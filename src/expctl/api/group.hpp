#pragma once
/// The dashboard's documents about several runs at once: a group of runs over seeds drawn as a
/// mean line with its confidence band, the runs of one configuration but the seed, and the spec
/// fields that differ across N runs. The band is compare's interval of a mean over runs
/// (compare::paired_t_test over the members' values at a step: Student's t with n − 1 degrees of
/// freedom), computed by the server, so the page and compare never disagree on a formula.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"

namespace expctl::api {

/// The most runs one group or one N-run comparison holds.
inline constexpr std::size_t k_max_group_runs = 64;

/// The runs whose stored spec values equal `run`'s in every field but the top-level `seed`
/// (`run` among them), in the store's list order (newest first), at most k_max_group_runs. A
/// run whose spec is not stored is its own group.
std::vector<store::RunRecord> seed_group(const store::Store& store, const store::RunRecord& run);

struct BandQuery {
  std::vector<store::RunRecord> runs{};  ///< the members
  std::string metric = "loss";
  std::size_t points = 1000;                ///< the most buckets (capped at k_max_series_points)
  std::optional<std::int64_t> from_step{};  ///< only steps ≥ this
  std::optional<std::int64_t> to_step{};    ///< only steps ≤ this
  double confidence = 0.95;
};

/// {"kind": "band", "metric", "confidence", "rank", "downsampled", "members": [{"id", "name",
/// "status", "seed" (null when the spec has none), "points"}], "x": [...], "mean": [...], "low":
/// [...], "high": [...], "n": [...]}. Each member's lowest rank (rank 0 as compare reads it); the
/// steps of all members together cut into at most `points` buckets of consecutive steps (one step
/// each when they fit); per bucket each member's mean over its points there, then across the
/// members that have one the mean and compare::paired_t_test's interval ("low", "high": null
/// below two members). "x" is each bucket's last step.
nlohmann::json band_document(const store::Store& store, const BandQuery& query);

/// {"kind": "spec-diff", "runs": [run_json without run_dir, + "seed", "summary"], "fields":
/// [{"path", "values": [one per run, null where absent]}] — only the dotted spec fields whose value
/// is not the same in every run, in first-seen order — "same": how many fields are equal
/// everywhere, "metrics": [{"name", "values"}] for every numeric summary key of any run}.
nlohmann::json spec_diff_document(const store::Store& store, const std::vector<store::RunRecord>& runs);

}  // namespace expctl::api
