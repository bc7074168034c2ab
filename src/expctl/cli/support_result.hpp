#pragma once
/// Printing what the run engine (run/engine.hpp) reports: the pinned-stack refusal, or the run's
/// summary as text or JSON. Shared by `expctl run` and `expctl resume`.

#include "expctl/cli/command.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/store/ship.hpp"

namespace expctl::cli {

/// Prints `result` (refusal tables and line to stderr; the summary to stdout) and returns the
/// exit code to leave with.
util::ExitCode print_run_result(const run::RunResult& result, OutputFormat format);

/// Opens the store of --db / EXPCTL_DB read-write, for the run engine; when that is a server, the
/// node-local store of --local-db instead (runs never wait on the network; see start_shipper).
run::OpenStore store_opener(const GlobalOptions& globals);

/// When --db names a server: opens it read-only (what `resume` tells about a run it does not find
/// on this node); empty for a SQLite --db.
run::OpenStore team_store_opener(const GlobalOptions& globals);

/// When --db names a server: a thread that ships --local-db there while the returned object
/// lives (notes on stderr unless --quiet). nullptr for a SQLite --db.
std::unique_ptr<store::BackgroundShipper> start_shipper(const GlobalOptions& globals);

}  // namespace expctl::cli
