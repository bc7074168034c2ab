#pragma once
/// Strict reproducibility (docs/compare.md, "Correctness metrics"): when every run of both sides
/// has the same spec hash and environment hash and its spec says `determinism: strict`, the loss
/// of every rank at every step (as float32 bit patterns, like loss_curve_sha256) and the
/// evaluation metrics (final_train_loss, eval_loss, eval_accuracy, as double bit patterns) must
/// equal A's first run's. Otherwise nothing is required here and those metrics are judged
/// against their thresholds as usual.

#include <vector>

#include "expctl/compare/comparison.hpp"

namespace expctl::compare {

/// Checks every run of A and B against A's first run; stops at the first run that differs and
/// names its first differing step and the lowest rank that differs there.
Reproducibility check_reproducibility(const std::vector<RunData>& a, const std::vector<RunData>& b);

}  // namespace expctl::compare
