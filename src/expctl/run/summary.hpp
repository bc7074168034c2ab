#pragma once
/// The summary of a run, computed from its stored metrics (fields in docs/run.md), with the same
/// per-step samples and warm-up rule as `expctl compare` (compare/comparison.hpp).

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/run_summary.hpp"
#include "expctl/store/store.hpp"

namespace expctl::run {

/// `previous` is the summary stored before this invocation (an empty one for a fresh run): wall
/// time and invocations add up, its time to the first step stays, everything else is computed
/// again from the stored metrics (the engine sets allreduce, world_size, drift, skipped_images).
/// The steps missing from `steps` (rank 0's logged steps, ascending and distinct), as inclusive
/// ranges of the steps its logging stride expected: the stride is the usual gap between two logged
/// steps (1 for the built-in trainer; a program may log every 10th), and a gap wider than it is a
/// hole ([[283, 300]] for 282 then 301 at stride 1). Steps logged at no regular stride (fewer than
/// 9 in 10 gaps alike) are never judged: empty.
std::vector<std::pair<std::int64_t, std::int64_t>> missing_step_ranges(const std::vector<std::int64_t>& steps);

compare::RunSummary compute_summary(const store::Store& store, const std::string& run_id,
                                    const compare::RunSummary& previous, double invocation_wall_s,
                                    std::optional<double> time_to_first_step_s);

}  // namespace expctl::run
