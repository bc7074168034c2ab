#include "expctl/compare/replicates.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>

#include "expctl/util/metric_names.hpp"

namespace expctl::compare {

namespace {

std::optional<double> finite_value(const RunData& run, std::string_view metric) {
  const auto found = run.summary.find(std::string(metric));
  if (found == run.summary.end() || !found->is_number() || !std::isfinite(found->get<double>())) {
    return std::nullopt;
  }
  return found->get<double>();
}

std::string curve_sha(const RunData& run) {
  const auto found = run.summary.find(util::summary_key::loss_curve_sha256);
  return found != run.summary.end() && found->is_string() ? found->get<std::string>() : std::string();
}

std::optional<std::int64_t> seed_of(const RunData& run) {
  const auto found = run.spec.find("seed");
  if (found == run.spec.end() || !found->is_number_integer()) {
    return std::nullopt;
  }
  return found->get<std::int64_t>();
}

// Seed → index, or nullopt when a run has no seed or two runs share one.
std::optional<std::map<std::int64_t, size_t>> seeds(const std::vector<RunData>& side) {
  std::map<std::int64_t, size_t> index;
  for (size_t i = 0; i < side.size(); ++i) {
    const auto seed = seed_of(side[i]);
    if (!seed || !index.emplace(*seed, i).second) {
      return std::nullopt;
    }
  }
  return index;
}

}  // namespace

std::vector<Observation> distinct_observations(const std::vector<RunData>& side, std::string_view metric) {
  std::vector<Observation> observations;
  std::vector<std::string> shas;
  for (const auto& run : side) {
    const auto value = finite_value(run, metric);
    if (!value) {
      continue;
    }
    const std::string sha = curve_sha(run);
    bool copy = false;
    for (size_t i = 0; i < observations.size() && !sha.empty(); ++i) {
      if (shas[i] == sha && std::bit_cast<std::uint64_t>(observations[i].value) == std::bit_cast<std::uint64_t>(*value)) {
        observations[i].run_ids.push_back(run.record.id);
        copy = true;
        break;
      }
    }
    if (!copy) {
      observations.push_back({*value, {run.record.id}});
      shas.push_back(sha);
    }
  }
  return observations;
}

size_t runs_with_value(const std::vector<RunData>& side, std::string_view metric) {
  return static_cast<size_t>(
      std::count_if(side.begin(), side.end(), [&](const RunData& run) { return finite_value(run, metric).has_value(); }));
}

std::optional<std::vector<std::pair<size_t, size_t>>> pair_by_seed(const std::vector<RunData>& a,
                                                                   const std::vector<RunData>& b) {
  if (a.size() < 2 || a.size() != b.size()) {
    return std::nullopt;
  }
  const auto seeds_a = seeds(a);
  const auto seeds_b = seeds(b);
  if (!seeds_a || !seeds_b) {
    return std::nullopt;
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto match = seeds_b->find(*seed_of(a[i]));
    if (match == seeds_b->end()) {
      return std::nullopt;
    }
    pairs.emplace_back(i, match->second);
  }
  return pairs;
}

}  // namespace expctl::compare
