#pragma once
/// Launch errors: util::LaunchError carries "run failed" (exit 1) by default; bad launch input
/// (options, launcher environment variables) is the user's to fix and exits 2.

#include <string>

#include "expctl/util/error.hpp"

namespace expctl::launch {

/// A util::LaunchError with exit code "usage" (2), for use with EXPCTL_CHECK.
class LaunchInputError : public util::LaunchError {
 public:
  explicit LaunchInputError(std::string message) : util::LaunchError(std::move(message), util::ExitCode::usage) {}
};

}  // namespace expctl::launch
