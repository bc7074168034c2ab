#pragma once
// Helpers of the sweep tests: sweep files over tests/data/sweep/base.yaml written to a TempDir,
// and the diagnostics a bad one gives.

#include <string>

#include <catch2/catch.hpp>

#include "expctl/sweep/sweep.hpp"
#include "expctl/util/diagnostic.hpp"
#include "support/test_support.hpp"

namespace expctl::test::sweep_test {

inline std::string data(const std::string& name) {
  return std::string(EXPCTL_SWEEP_TEST_DATA) + "/" + name;
}

/// `body` after a "base:" line naming tests/data/sweep/base.yaml by its absolute path.
inline std::filesystem::path write_sweep(const TempDir& dir, const std::string& body,
                                         const std::string& name = "sweep.yaml") {
  return dir.write(name, "base: " + data("base.yaml") + "\n" + body);
}

/// Every diagnostic of loading `file`, formatted as the CLI prints it; empty when it loads.
inline std::string problems_of(const std::filesystem::path& file) {
  try {
    sweep::load_sweep(file);
  } catch (const util::DiagnosticError& error) {
    CHECK(error.exit_code() == util::ExitCode::usage);
    return error.report();
  }
  return "";
}

}  // namespace expctl::test::sweep_test
