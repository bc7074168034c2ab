#include "expctl/cli/support_sweep.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

sweep::Sweep load_sweep_file(const std::string& file) {
  if (!sweep::is_sweep_file(file) && std::filesystem::is_regular_file(file)) {
    throw util::UsageError(fmt::format("{} is not a sweep file (it has no top-level \"base:\" key): a sweep names its "
                                       "base spec and the axes to vary (docs/sweeps.md); a spec runs with expctl run",
                                       file));
  }
  return sweep::load_sweep(file);
}

void write_sweep_report(const GlobalOptions& globals, const sweep::Sweep& sweep, const std::vector<std::string>& metrics,
                        const std::string& format, const std::string& output) {
  const auto db = open_store_if_present(globals);
  EXPCTL_CHECK(db.has_value(), util::StoreError, "{}; run the sweep first: expctl sweep {}",
               missing_database_hint(globals), sweep.file.string());
  const sweep::Report report = sweep::build_report(sweep, sweep::completed_runs(sweep, *db), metrics);
  write_output(output, sweep::render(report, format));
}

}  // namespace expctl::cli
