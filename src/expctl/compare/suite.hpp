#pragma once
/// A nightly suite file (`expctl nightly SUITE.yaml`):
///   suite: nightly            # name, used in the JUnit XML and the Markdown summary
///   specs:
///     - spec: tiny-synthetic.yaml   # relative to the suite file's directory
///       repeats: 2                  # runs per night (default 1); 5+ lets groups compare per run
///       set: [train.max_steps=40]   # optional --set overrides

#include <filesystem>
#include <string>
#include <vector>

namespace expctl::compare {

/// One spec of a suite.
struct SuiteEntry {
  std::filesystem::path spec;  ///< resolved against the suite file's directory
  int repeats = 1;
  std::vector<std::string> overrides;  ///< "key.path=value", as --set
};

/// A parsed suite.
struct Suite {
  std::string name;
  std::vector<SuiteEntry> specs;
};

/// Reads a suite file. Throws util::CompareError (exit 2) naming the file and the problem.
Suite load_suite(const std::filesystem::path& file);

}  // namespace expctl::compare
