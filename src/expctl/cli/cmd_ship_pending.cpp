// `expctl ship_pending` (hidden): ships what a run's exit left for the team store, once, then
// ends. Started in the background by the next expctl command on the node that reads the team
// store (support_store.cpp) while the marker beside the node's store says work is left
// (store/ship_pending.hpp); one at a time, under a lock on that marker. The server comes from
// EXPCTL_DB, never from argv, so that a password in it is not on any process list.

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/store/ship_pending.hpp"

namespace expctl::cli {
namespace {

void run_ship_pending(GlobalOptions& globals) {
  EXPCTL_CHECK(!store_is_file(globals), util::UsageError,
               "ship_pending ships a node's store to a team server: give the server as --db or EXPCTL_DB");
  store::StoreOptions options;
  if (!globals.runs_dir.empty()) {
    options.runs_root = globals.runs_dir;
  }
  const store::PendingPass pass = store::ship_pending(globals.local_db, globals.db_path, options);
  if (pass.ran && !globals.quiet) {
    std::cerr << fmt::format(
        "expctl: shipped {} point(s) of {} run(s) left by earlier runs; {} run(s) and {} "
        "point(s) still behind\n",
        pass.report.points_shipped, pass.report.runs_shipped, pass.lag.runs_behind, pass.lag.points_behind);
  }
}

void setup_ship_pending(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  CLI::App* command = app.add_subcommand(
      "ship_pending", "Ship what a run's exit left for the team store (started in the background by expctl).");
  command->group("");  // hidden: people use `expctl sync`
  command->callback([globals] { run_ship_pending(*globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(ship_pending, 91, setup_ship_pending);

}  // namespace expctl::cli
