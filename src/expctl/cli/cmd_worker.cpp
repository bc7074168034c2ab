// `expctl worker --run-dir DIR [--resume]`: one rank of a run (hidden). The supervisor of
// `expctl run` starts one per local rank with torchrun's environment contract; the rank reads
// the resolved spec from the run folder, trains, and reports through its control channel.
// `--run-dir -`: the folder comes as one line on standard input (`expctl run` starts its ranks
// before the run is recorded, so that they load LibTorch meanwhile).
// Ranks never open the database: the supervisor is its only writer.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_signals.hpp"
#include "expctl/run/engine.hpp"

namespace expctl::cli {
namespace {

struct WorkerOptions {
  std::string run_dir;
  bool resume = false;
};

void run_worker_command(const WorkerOptions& options, GlobalOptions& globals) {
  // The trainer's lines are the rank's stdout, which its supervisor reads; errors go to stderr.
  TerminalObserver observer(globals.quiet, std::nullopt, std::cout);
  globals.result =
      static_cast<util::ExitCode>(run::run_rank(options.run_dir, options.resume, observer, process_stop()));
}

void setup_worker(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<WorkerOptions>();
  CLI::App* command = app.add_subcommand(
      "worker", "One rank of a run (started by `expctl run`; reads RANK, WORLD_SIZE, MASTER_ADDR, ...).");
  command->group("");  // hidden: people start runs with `expctl run`
  command
      ->add_option("--run-dir", options->run_dir, "Run folder holding resolved.json; - reads it from standard input")
      ->required();
  command->add_flag("--resume", options->resume, "Continue from this rank's checkpoint");
  command->callback([options, globals] { run_worker_command(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(worker, 90, setup_worker);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
