#include "expctl/api/compare.hpp"

#include "expctl/compare/selector.hpp"
#include "expctl/report/report.hpp"

namespace expctl::api {

std::vector<compare::RunData> load_group(const store::Store& store, const std::string& selector,
                                        const compare::LoadOptions& options) {
  return compare::load_runs(store, compare::resolve_group(store, selector), options);
}

std::vector<compare::RunData> load_history(const store::Store& store, const std::vector<compare::RunData>& a,
                                           const std::vector<compare::RunData>& b, size_t limit) {
  if (limit == 0) {
    return {};
  }
  return compare::load_history(store, a, b, {.limit = limit});
}

compare::Comparison compare_groups(const store::Store& store, const std::string& a, const std::string& b,
                                   const CompareRequest& request) {
  const compare::LoadOptions load{.straggler_timeline = request.straggler_timeline};
  // A's selector first: its error is the one reported when both are wrong.
  const auto records_a = compare::resolve_group(store, a);
  const auto records_b = compare::resolve_group(store, b);
  const auto [runs_a, runs_b] = compare::load_both(store, records_a, records_b, load);
  const auto history = load_history(store, runs_a, runs_b, request.history);
  return compare::compare_runs(runs_a, runs_b, request.options, history);
}

nlohmann::json compare_document(const compare::Comparison& comparison) {
  return report::to_json(comparison);
}

}  // namespace expctl::api
