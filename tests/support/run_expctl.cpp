#include <cstdlib>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

// Kept apart from test_support.cpp: only the CLI tests need the expctl binary, and depending on
// it would relink the whole binary (LibTorch included) before every unit-test build.
namespace expctl::test {

std::string expctl_binary() { return EXPCTL_BINARY_PATH; }

util::SubprocessResult run_expctl(const std::vector<std::string>& args,
                                  const std::map<std::string, std::optional<std::string>>& env,
                                  const std::string& working_directory) {
  std::vector<std::string> argv{expctl_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  util::SubprocessOptions options;
  options.env = {{"EXPCTL_DB", std::nullopt}, {"NO_COLOR", "1"}};
  for (const auto& [name, value] : env) {
    options.env[name] = value;
  }
  options.working_directory = working_directory;
  // Two minutes a command; EXPCTL_TEST_TIMEOUT_SCALE stretches it for slow builds (the asan
  // test preset sets 4: an A/B of 10 runs takes over 2 minutes under ASan).
  options.timeout = std::chrono::minutes(2) * timeout_scale();
  auto result = util::run_capture(argv, options);
  REQUIRE(result.has_value());
  return *result;
}

}  // namespace expctl::test
