#pragma once
/// The summary of a run, computed from its stored metrics (fields in docs/run.md), with the same
/// per-step samples and warm-up rule as `expctl compare` (compare/comparison.hpp).

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"

namespace expctl::run {

/// `previous` is the summary stored before this invocation ({} for a fresh run).
nlohmann::json compute_summary(const store::Store& store, const std::string& run_id, const nlohmann::json& previous,
                               double invocation_wall_s, std::optional<double> time_to_first_step_s);

}  // namespace expctl::run
