// Strict reproducibility: runs of one spec on one environment under determinism strict must agree
// bit for bit (the loss of every rank at every step, and the evaluation metrics).
#include "expctl/compare/reproducibility.hpp"

#include <bit>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "expctl/compare/comparison.hpp"

namespace expctl::compare {

namespace {

using nlohmann::json;

struct Difference {
  std::int64_t step = 0;
  int rank = 0;
};

bool strict(const RunData& run) {
  const auto found = run.spec.find("determinism");
  return found == run.spec.end() || !found->is_string() || found->get<std::string>() == "strict";
}

bool same_bits(float x, float y) {
  return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
}

// The first step at which two ranks' loss columns disagree (a step only one has counts).
std::optional<std::int64_t> first_difference(const store::SeriesColumns& x, const store::SeriesColumns& y) {
  const size_t common = std::min(x.steps.size(), y.steps.size());
  for (size_t i = 0; i < common; ++i) {
    if (x.steps[i] != y.steps[i]) {
      return std::min(x.steps[i], y.steps[i]);
    }
    if (!same_bits(static_cast<float>(x.values[i]), static_cast<float>(y.values[i]))) {
      return x.steps[i];
    }
  }
  if (x.steps.size() != y.steps.size()) {
    return (x.steps.size() > common ? x.steps : y.steps)[common];
  }
  return std::nullopt;
}

// The loss of every rank; rank 0 from the plot data when the run was built without columns.
std::map<int, store::SeriesColumns> loss_by_rank(const RunData& run) {
  std::map<int, store::SeriesColumns> ranks;
  for (const auto& rank : run.loss_ranks) {
    ranks[rank.rank] = rank;
  }
  if (ranks.empty() && !run.loss.empty()) {
    ranks[0] = store::SeriesColumns{0, run.loss_steps, run.loss};
  }
  return ranks;
}

std::optional<Difference> first_loss_difference(const RunData& x, const RunData& y) {
  const auto left = loss_by_rank(x);
  const auto right = loss_by_rank(y);
  std::optional<Difference> first;
  const auto consider = [&](int rank, std::optional<std::int64_t> step) {
    if (step && (!first || *step < first->step)) {
      first = Difference{*step, rank};
    }
  };
  for (const auto& [rank, columns] : left) {
    const auto other = right.find(rank);
    if (other != right.end()) {
      consider(rank, first_difference(columns, other->second));
    } else if (!columns.steps.empty()) {
      consider(rank, columns.steps.front());
    }
  }
  for (const auto& [rank, columns] : right) {
    if (!left.contains(rank) && !columns.steps.empty())
      consider(rank, columns.steps.front());
  }
  return first;
}

// Evaluation metrics whose summary values differ bit for bit (a value on one side only differs).
std::vector<std::string> differing_metrics(const RunData& x, const RunData& y) {
  std::vector<std::string> names;
  for (const auto& info : k_metrics) {
    if (info.timing)
      continue;
    const json left = x.summary.value(std::string(info.name), json());
    const json right = y.summary.value(std::string(info.name), json());
    const bool both = left.is_number() && right.is_number();
    if ((both &&
         std::bit_cast<std::uint64_t>(left.get<double>()) != std::bit_cast<std::uint64_t>(right.get<double>())) ||
        (!both && left != right)) {
      names.emplace_back(info.name);
    }
  }
  return names;
}

bool required_for(const std::vector<RunData>& a, const std::vector<RunData>& b) {
  const auto& first = a.front().record;
  if (!first.environment_hash) {
    return false;
  }
  for (const auto* side : {&a, &b}) {
    for (const auto& run : *side) {
      if (run.record.spec_hash != first.spec_hash || run.record.environment_hash != first.environment_hash ||
          !strict(run)) {
        return false;
      }
    }
  }
  return true;
}

std::string difference_reason(const Reproducibility& result, const std::string& baseline) {
  if (result.step) {
    return fmt::format("reproducibility regression: first difference at step {} on rank {} (run {} against {})",
                       *result.step, *result.rank, result.run_id, baseline);
  }
  return fmt::format("reproducibility regression: {} differ{} bitwise (run {} against {}; loss curves identical)",
                     fmt::join(result.metrics, ", "), result.metrics.size() == 1 ? "s" : "", result.run_id, baseline);
}

}  // namespace

Reproducibility check_reproducibility(const std::vector<RunData>& a, const std::vector<RunData>& b) {
  Reproducibility result;
  result.required = required_for(a, b);
  if (!result.required) {
    return result;
  }
  const RunData& baseline = a.front();
  size_t checked = 1;
  for (const auto* side : {&a, &b}) {
    for (const auto& run : *side) {
      if (&run == &baseline)
        continue;
      ++checked;
      const auto loss = first_loss_difference(baseline, run);
      auto metrics = differing_metrics(baseline, run);
      if (loss || !metrics.empty()) {
        result.identical = false;
        result.run_id = run.record.id;
        result.step = loss ? std::optional(loss->step) : std::nullopt;
        result.rank = loss ? std::optional(loss->rank) : std::nullopt;
        result.metrics = std::move(metrics);
        result.reason = difference_reason(result, baseline.record.id);
        return result;
      }
    }
  }
  result.reason = fmt::format(
      "bitwise identical: {} runs of one spec on one environment under strict determinism "
      "(loss of every rank at every step, evaluation metrics)",
      checked);
  return result;
}

}  // namespace expctl::compare
