#include <catch2/catch.hpp>

#include "support/test_support.hpp"

using expctl::test::run_expctl;

TEST_CASE("cli: --version names expctl, its commit and LibTorch") {
  const auto result = run_expctl({"--version"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("expctl 0."));
  CHECK_THAT(result.out, Catch::Contains("commit "));
  CHECK_THAT(result.out, Catch::Contains("LibTorch "));
}

TEST_CASE("cli: --help teaches commands, global options and exit codes") {
  const auto result = run_expctl({"--help"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("--db"));
  CHECK_THAT(result.out, Catch::Contains("EXPCTL_DB"));
  CHECK_THAT(result.out, Catch::Contains("Exit codes:"));
  CHECK_THAT(result.out, Catch::Contains("130"));
}

TEST_CASE("cli: no command or an unknown command is a usage error (exit 2)") {
  const auto none = run_expctl({});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::StartsWith("expctl: error: "));
  const auto unknown = run_expctl({"frobnicate"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Catch::StartsWith("expctl: error: unknown command \"frobnicate\""));
  const auto typo = run_expctl({"-v", "--db", "x.db", "--color=never", "valdate"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("(did you mean \"validate\"?)"));
}
