#pragma once
/// Process exit codes: one enum, shown in every `--help` footer and in the README.

#include <string_view>

namespace expctl::util {

enum class ExitCode : int {
  ok = 0,            ///< success
  run_failed = 1,    ///< a run failed, or an unexpected internal error
  usage = 2,         ///< bad command line, bad spec or other bad input
  mismatch = 3,      ///< regression found (compare/nightly) or pinned stack mismatch (verify/run)
  interrupted = 130, ///< stopped by SIGINT/SIGTERM (128 + SIGINT)
};

struct ExitCodeInfo {
  ExitCode code;
  std::string_view meaning;
};

/// Every exit code with its meaning, in numeric order (used by --help and the docs).
inline constexpr ExitCodeInfo k_exit_codes[] = {
    {ExitCode::ok, "success"},
    {ExitCode::run_failed, "the run failed (or an internal error)"},
    {ExitCode::usage, "usage or input error (bad option, spec, selector or file)"},
    {ExitCode::mismatch, "regression found, or pinned software stack mismatch"},
    {ExitCode::interrupted, "interrupted (SIGINT/SIGTERM)"},
};

constexpr int to_int(ExitCode code) { return static_cast<int>(code); }

}  // namespace expctl::util
