#pragma once
/// `expctl sweep FILE --slurm [--wait]`: the points still to run submitted as one Slurm job array,
/// followed with --wait and merged into the store (sweep_run/slurm_array.hpp); and the options of
/// sweep's "Slurm" group, --print-sbatch's included.

#include <string>

#include "expctl/cli/command.hpp"
#include "expctl/sweep/sbatch.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/sweep_run/execute.hpp"

namespace expctl::cli {

struct SlurmSweepOptions {
  bool print_sbatch = false;
  bool submit = false;  ///< --slurm
  bool wait = false;    ///< --wait
  sweep::SbatchOptions sbatch;
};

void add_slurm_options(CLI::App* command, SlurmSweepOptions& options);

/// Submits the points `execution` plans as one array (nothing when every point is done), prints
/// the job, and with --wait follows it, merges the tasks' stores into the store and sets the exit
/// code: 0 when every task completed, 1 when one did not, 130 when Ctrl-C stopped the following
/// (the array runs on).
void submit_sweep(const sweep::Sweep& sweep, const std::string& file, const sweep_run::Execution& execution,
                  const sweep_run::StoreLocation& where, const SlurmSweepOptions& options, GlobalOptions& globals);

}  // namespace expctl::cli
