#pragma once
/// Helpers shared by `expctl sweep` and `expctl compare SWEEP`: loading a sweep file and writing
/// the results across its points.

#include <string>
#include <vector>

#include "expctl/cli/command.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::cli {

/// Loads and validates a sweep file; a spec given instead is a usage error naming the fix.
sweep::Sweep load_sweep_file(const std::string& file);

/// Writes the report across the sweep's points (sweep/report.hpp) in `format` to `output`
/// (stdout when empty or "-"). A missing store is a StoreError naming the sweep to run.
void write_sweep_report(const GlobalOptions& globals, const sweep::Sweep& sweep, const std::vector<std::string>& metrics,
                        const std::string& format, const std::string& output);

}  // namespace expctl::cli
