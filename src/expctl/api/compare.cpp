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
  // Both sides loaded together (compare::load_runs reads several runs at once).
  const auto records_a = compare::resolve_group(store, a);
  const auto records_b = compare::resolve_group(store, b);
  auto records = records_a;
  records.insert(records.end(), records_b.begin(), records_b.end());
  auto runs = compare::load_runs(store, records, load);
  const std::vector<compare::RunData> runs_b(std::make_move_iterator(runs.begin() + std::ssize(records_a)),
                                             std::make_move_iterator(runs.end()));
  runs.erase(runs.begin() + std::ssize(records_a), runs.end());
  const auto& runs_a = runs;
  const auto history = load_history(store, runs_a, runs_b, request.history);
  return compare::compare_runs(runs_a, runs_b, request.options, history);
}

nlohmann::json compare_document(const compare::Comparison& comparison) {
  return report::to_json(comparison);
}

}  // namespace expctl::api
