#include "expctl/cli/support_compare.hpp"

#include <iostream>

#include <fmt/format.h>

#include "expctl/compare/selector.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

compare::CompareOptions make_compare_options(const std::vector<std::string>& ignore,
                                             const std::vector<std::string>& thresholds) {
  compare::CompareOptions options;
  for (const auto& value : ignore) {
    size_t start = 0;
    while (start <= value.size()) {
      const size_t comma = value.find(',', start);
      std::string key = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!key.empty()) {
        options.ignore.push_back(std::move(key));
      }
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  for (const auto& option : thresholds) {
    options.thresholds.push_back(compare::parse_threshold_override(option));
  }
  return options;
}

std::vector<compare::RunData> load_group(const store::Store& store, const std::string& selector) {
  std::vector<compare::RunData> runs;
  for (const auto& record : compare::resolve_group(store, selector)) {
    runs.push_back(compare::load_run(store, record));
  }
  return runs;
}

std::vector<compare::RunData> load_history(const store::Store& store, const std::vector<compare::RunData>& a,
                                           const std::vector<compare::RunData>& b, size_t limit) {
  if (limit == 0) {
    return {};
  }
  return compare::load_history(store, a, b, {.limit = limit});
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text << std::flush;
    return;
  }
  if (auto written = util::write_file_atomic(path, text); !written) {
    throw util::CompareError(fmt::format("{}: cannot write the report: {}", path, written.error().message),
                             util::ExitCode::run_failed);
  }
}

util::ExitCode outcome_exit_code(compare::Outcome outcome) {
  return static_cast<util::ExitCode>(compare::exit_code(outcome));
}

util::ExitCode outcome_exit_code(compare::Outcome outcome, bool fail_on_inconclusive) {
  return static_cast<util::ExitCode>(compare::exit_code(outcome, fail_on_inconclusive));
}

}  // namespace expctl::cli
