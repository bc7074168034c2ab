#pragma once
/// What counts as one observation of a correctness metric (a loss, an accuracy) in a group of runs.
///
/// Under `determinism: strict` every repeat of one spec with one seed is the same trajectory bit
/// for bit: seven such runs are one observation, not seven, and counting them seven times gives a
/// p-value of 0.0004 and an interval of zero width to a difference that one seed's luck explains.
/// So runs whose loss curves are bitwise equal (the same summary `loss_curve_sha256`) and whose
/// value of the metric is bitwise equal count once. A loss or accuracy question is answered across
/// seeds; when repeat i of both sides ran with seed i (`expctl ab --vary-seed`), the groups are
/// paired and the verdict uses the per-seed differences.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "expctl/compare/comparison.hpp"

namespace expctl::compare {

/// One distinct value of a metric on one side, and the runs that produced it.
struct Observation {
  double value = 0;
  std::vector<std::string> run_ids;  ///< the run and its copies, in the side's order
};

/// The distinct observations of summary metric `metric` on one side, in first-seen order: runs
/// with the same loss_curve_sha256 and the same value bits are one observation. A run without a
/// loss_curve_sha256 (older stores) is its own observation; a run without a finite value of the
/// metric adds nothing.
std::vector<Observation> distinct_observations(const std::vector<RunData>& side, std::string_view metric);

/// Runs of the side that have a finite value of `metric`.
size_t runs_with_value(const std::vector<RunData>& side, std::string_view metric);

/// The runs of A and B paired by seed: (index in A, index in B) for each seed, in A's order, when
/// both sides have two or more runs, every run has an integer spec `seed`, the seeds are distinct
/// within each side, and both sides ran the same seeds. Nullopt otherwise (independent groups).
std::optional<std::vector<std::pair<size_t, size_t>>> pair_by_seed(const std::vector<RunData>& a,
                                                                   const std::vector<RunData>& b);

}  // namespace expctl::compare
