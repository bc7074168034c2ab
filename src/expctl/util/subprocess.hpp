#pragma once
/// Running a child process and capturing its output (used by CLI tests, probes and benches).
/// The launcher's long-lived rank supervision is a separate, richer mechanism.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expctl/util/error.hpp"

namespace expctl::util {

// Every member has an initializer, so `{.timeout = ...}` leaves the rest empty without a
// -Wmissing-field-initializers warning from g++ 13.
struct SubprocessOptions {
  /// Variables set (or, with nullopt, removed) on top of the parent's environment.
  std::map<std::string, std::optional<std::string>> env{};
  std::string stdin_data{};
  std::string working_directory{};  ///< empty: inherit
  /// The child (and its process group) is killed with SIGKILL after this long.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct SubprocessResult {
  int exit_code = -1;  ///< exit status, or -1 when killed by a signal
  int signal = 0;      ///< terminating signal, 0 when it exited
  bool timed_out = false;
  std::string out;
  std::string err;
};

/// Runs argv[0] (looked up in PATH) with the arguments, waits for it and captures both streams.
/// The child runs in its own process group, which is killed on timeout, so nothing is left behind.
Expected<SubprocessResult> run_capture(const std::vector<std::string>& argv, const SubprocessOptions& options = {});

}  // namespace expctl::util
