#include "expctl/api/sweep.hpp"

#include <algorithm>

#include "expctl/api/runs.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/sweep/report_parts.hpp"

namespace expctl::api {

nlohmann::json sweep_document(const store::Store& store, const sweep::Sweep& sweep,
                              const std::vector<std::string>& metrics, std::vector<sweep::ArrayPoint> array) {
  const auto runs = sweep::completed_runs(sweep, store);
  sweep::Report report = sweep::build_report(sweep, runs, metrics);
  report.array = std::move(array);
  nlohmann::json document = sweep::to_json(report);
  document["sweep"].erase("file");  // a path on the server's disk: nothing a page needs
  document["title"] = sweep::detail::report_heading(report);
  document["table"] = {{"header", sweep::detail::report_header(report)}, {"rows", sweep::detail::report_rows(report)}};
  document["notes"] = sweep::detail::report_notes(report);
  nlohmann::json numeric = nlohmann::json::array();
  for (std::size_t axis = 0; axis < report.axes.size(); ++axis) {
    const bool all_numbers = !report.configurations.empty() &&
                             std::all_of(report.configurations.begin(), report.configurations.end(),
                                         [&](const sweep::Configuration& c) { return c.axes[axis].is_number(); });
    if (all_numbers) {
      numeric.push_back(report.axes[axis]);
    }
  }
  document["numeric_axes"] = std::move(numeric);
  return document;
}

nlohmann::json sweeps_list(const std::vector<std::shared_ptr<const sweep::Sweep>>& sweeps) {
  nlohmann::json document = json_envelope("sweeps");
  document["sweeps"] = nlohmann::json::array();
  for (const auto& sweep : sweeps) {
    document["sweeps"].push_back({{"name", sweep->name},
                                  {"hash", sweep->hash},
                                  {"points", sweep->points.size()},
                                  {"runs_expected", sweep->total_runs()}});
  }
  return document;
}

}  // namespace expctl::api
