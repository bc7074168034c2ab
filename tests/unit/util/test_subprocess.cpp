#include <catch2/catch.hpp>

#include <csignal>

#include "expctl/util/subprocess.hpp"

using namespace expctl::util;

TEST_CASE("subprocess: captures both streams, exit code and environment") {
  SubprocessOptions options;
  options.env["EXPCTL_TEST_VALUE"] = "42";
  const auto result = run_capture({"sh", "-c", "echo out $EXPCTL_TEST_VALUE; echo err >&2; exit 3"}, options);
  REQUIRE(result.has_value());
  CHECK(result->out == "out 42\n");
  CHECK(result->err == "err\n");
  CHECK(result->exit_code == 3);
  CHECK(result->signal == 0);
}

TEST_CASE("subprocess: stdin is delivered") {
  SubprocessOptions options;
  options.stdin_data = "hello";
  const auto result = run_capture({"cat"}, options);
  REQUIRE(result.has_value());
  CHECK(result->out == "hello");
}

TEST_CASE("subprocess: timeout kills the child and its group") {
  SubprocessOptions options;
  options.timeout = std::chrono::milliseconds(300);
  const auto result = run_capture({"sh", "-c", "sleep 30 & sleep 30"}, options);
  REQUIRE(result.has_value());
  CHECK(result->timed_out);
  CHECK(result->signal == SIGKILL);
}

TEST_CASE("subprocess: a missing program exits 127") {
  const auto result = run_capture({"/nonexistent/program"});
  REQUIRE(result.has_value());
  CHECK(result->exit_code == 127);
}
