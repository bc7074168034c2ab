// The suite's skip rule (tests/support/catch_main.cpp, test::skip()): a test case that skips exits
// 77, which ctest reports as skipped, only when none of its assertions failed; with
// EXPCTL_REQUIRE_ALL=1 a skip is a failure that names what is missing. Each case runs this test
// binary again on a hidden example case and reads its exit code, as ctest would.
#include <filesystem>
#include <string>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/util/subprocess.hpp"

using namespace expctl;

TEST_CASE("skip rule example: skips", "[.][skip-rule]") {
  test::skip("example-need", "an example of a test that cannot run here");
}

TEST_CASE("skip rule example: fails a check then skips", "[.][skip-rule]") {
  CHECK(1 + 1 == 3);
  test::skip("example-need", "an example of a test that cannot run here");
}

TEST_CASE("skip rule example: fails 77 checks", "[.][skip-rule]") {
  for (int i = 0; i < 77; ++i) {
    CHECK(i < 0);
  }
}

namespace {

util::SubprocessResult run_example(const std::string& name, const std::optional<std::string>& require_all,
                                   const std::optional<std::string>& allowed = std::nullopt) {
  const auto self = std::filesystem::read_symlink("/proc/self/exe").string();
  // The compact reporter: one line a message, unwrapped.
  auto result = util::run_capture({self, name, "--reporter", "compact"},
                                  {.env = {{"EXPCTL_REQUIRE_ALL", require_all}, {"EXPCTL_ALLOWED_SKIPS", allowed}}});
  REQUIRE(result.has_value());
  INFO(result->out);
  return *result;
}

}  // namespace

TEST_CASE("skip rule: a test case that only skips exits 77, which ctest reports as skipped", "[util]") {
  const auto result = run_example("skip rule example: skips", std::nullopt);
  CHECK(result.exit_code == 77);
  CHECK_THAT(result.out, Catch::Contains("SKIPPED, not passed: an example of a test that cannot run here"));
}

TEST_CASE("skip rule: a check that fails before the skip makes the test fail, not skip", "[util]") {
  const auto result = run_example("skip rule example: fails a check then skips", std::nullopt);
  CHECK_THAT(result.out, Catch::Contains("SKIPPED, not passed"));
  CHECK(result.exit_code != 0);
  CHECK(result.exit_code != 77);
}

TEST_CASE("skip rule: 77 failed checks do not read as a skip", "[util]") {
  const auto result = run_example("skip rule example: fails 77 checks", std::nullopt);
  CHECK(result.exit_code != 0);
  CHECK(result.exit_code != 77);
}

TEST_CASE("skip rule: with EXPCTL_REQUIRE_ALL=1 a skip fails and names what is missing, unless it is allowed",
          "[util]") {
  const auto required = run_example("skip rule example: skips", "1");
  CHECK(required.exit_code != 0);
  CHECK(required.exit_code != 77);
  CHECK_THAT(required.out, Catch::Contains("EXPCTL_REQUIRE_ALL=1 but this test cannot run here: example-need is "
                                           "missing (an example of a test that cannot run here)"));

  const auto allowed = run_example("skip rule example: skips", "1", "cuda, example-need");
  CHECK(allowed.exit_code == 77);
  const auto other_allowed = run_example("skip rule example: skips", "1", "example");
  CHECK(other_allowed.exit_code != 77);
}
