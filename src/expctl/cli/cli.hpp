#pragma once
/// The command-line interface: CLI11 wiring, one file per subcommand, one top-level catch.

namespace expctl::cli {

/// Parses the command line, runs the subcommand and returns the process exit code
/// (see util::ExitCode). Every error reaches the user as one "expctl: error: ..." report.
int run(int argc, char** argv);

}  // namespace expctl::cli
