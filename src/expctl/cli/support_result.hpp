#pragma once
/// Printing what the run engine (run/engine.hpp) reports: the pinned-stack refusal, or the run's
/// summary as text or JSON. Shared by `expctl run` and `expctl resume`.

#include "expctl/cli/command.hpp"
#include "expctl/run/engine.hpp"

namespace expctl::cli {

/// Prints `result` (refusal tables and line to stderr; the summary to stdout) and returns the
/// exit code to leave with.
util::ExitCode print_run_result(const run::RunResult& result, OutputFormat format);

/// Opens the store of --db / EXPCTL_DB read-write, for the run engine.
run::OpenStore store_opener(const GlobalOptions& globals);

}  // namespace expctl::cli
