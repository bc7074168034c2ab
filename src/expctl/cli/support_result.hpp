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
/// lives (notes on stderr unless --quiet). nullptr for a SQLite --db. Its last pass waits up to
/// `ship_wait_s` seconds for a server that is away.
std::unique_ptr<store::BackgroundShipper> start_shipper(const GlobalOptions& globals, double ship_wait_s);

/// The run's exit: the shipper's last pass, and one line (under --quiet too) when points are left
/// behind, saying how many and what ships them (the marker of store/ship_pending.hpp is left for
/// the next command); a caught-up server clears the marker. Does nothing for nullptr.
void finish_shipper(store::BackgroundShipper* shipper, const GlobalOptions& globals, double ship_wait_s);

/// --ship-wait's default: how long a last pass waits for a server that is away (seconds).
inline constexpr double k_default_ship_wait_s =
    std::chrono::duration<double>(store::BackgroundShipper::k_final_wait).count();

/// One shipping pass now, for a command that records without training (a Slurm submission, a
/// cancel): start_shipper then finish_shipper with the default wait. Nothing for a SQLite --db.
void ship_now(const GlobalOptions& globals);

/// --ship-wait SECONDS on `run` and `resume`.
void add_ship_wait_option(CLI::App* command, double& seconds);

}  // namespace expctl::cli
