#pragma once
/// Internal to the sweep module: the pieces of a sweep report that every rendering shares
/// (report.cpp defines them; report_html.cpp uses them too), so no two formats disagree.

#include <string>
#include <vector>

#include "expctl/sweep/report.hpp"

namespace expctl::sweep::detail {

/// "sweep NAME (8 points, 8 of 8 runs completed, sweep hash 1a2b3c4d5e6f)".
std::string report_heading(const Report& report);
/// The spread note, the best configuration per metric, the points without a completed run.
std::vector<std::string> report_notes(const Report& report);
/// The configuration table: axes..., points, runs, metrics...
std::vector<std::string> report_header(const Report& report);
std::vector<std::vector<std::string>> report_rows(const Report& report);

}  // namespace expctl::sweep::detail
