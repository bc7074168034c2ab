#pragma once
/// The sweep page's document: the results across a sweep's points that `expctl sweep FILE
/// --report` shows, built by the sweep module's own report (sweep/report.hpp) from the store, so
/// the page and the CLI cannot disagree. The server never reads a file a request names: sweeps
/// are loaded from the files given to `expctl serve --sweep` at start.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/sweep/array_progress.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::api {

/// The sweep report's JSON (sweep::to_json: "kind": "sweep-report", axes, metrics, configurations
/// with each metric's median, spread and per-run values, points, best) plus what its table and
/// HTML show as text: "title" (the heading), "table": {"header": [...], "rows": [[...]]},
/// "notes": [...], and "numeric_axes": the axes every configuration holds a number for (those a
/// metric is plotted against). `metrics` empty: the report's default metrics.
/// `array`: the points a submitted Slurm array holds (their states in "array" and "notes").
nlohmann::json sweep_document(const store::Store& store, const sweep::Sweep& sweep,
                              const std::vector<std::string>& metrics = {}, std::vector<sweep::ArrayPoint> array = {});

/// {"kind": "sweeps", "sweeps": [{"name", "hash", "points", "runs_expected"}]} of the sweeps served.
nlohmann::json sweeps_list(const std::vector<std::shared_ptr<const sweep::Sweep>>& sweeps);

}  // namespace expctl::api
