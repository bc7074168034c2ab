// `expctl sync`: ship the node-local store to the team's server (--db), once or --follow. The
// shipping rules (batches, idempotence, progress in the server's transaction) are store/ship.hpp's.

#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/store/ship.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/interrupt_signals.hpp"

namespace expctl::cli {
namespace {

struct SyncOptions {
  std::string from;
  std::string run;
  bool follow = false;
  double interval_s = 2.0;
  bool status = false;
  std::string format = "text";
};

void print_report(const SyncOptions& options, const store::ShipReport& report, const store::ShipLag& lag,
                  const std::string& server) {
  if (options.format == "json") {
    nlohmann::json document = json_envelope("sync");
    document["from"] = options.from;
    document["to"] = server;
    document["runs_considered"] = report.runs_considered;
    document["runs_shipped"] = report.runs_shipped;
    document["points_shipped"] = report.points_shipped;
    document["batches"] = report.batches;
    document["runs_behind"] = lag.runs_behind;
    document["points_behind"] = lag.points_behind;
    print_json(document);
    return;
  }
  if (!options.status) {
    std::cout << fmt::format("shipped {} point(s) of {} run(s) in {} batch(es) from {} to {}\n", report.points_shipped,
                             report.runs_shipped, report.batches, options.from, server);
  }
  std::cout << (lag.runs_behind == 0 ? fmt::format("{} is up to date with {}\n", server, options.from)
                                     : fmt::format("{} is behind {} by {} run(s) and {} point(s)\n", server,
                                                   options.from, lag.runs_behind, lag.points_behind));
}

void check_server(const GlobalOptions& globals) {
  EXPCTL_CHECK(!store_is_file(globals), util::UsageError,
               "sync sends a node's store to a team server: give the server as --db postgresql://USER@HOST/DB (or "
               "service=NAME, or EXPCTL_DB); to combine SQLite files use 'expctl merge'");
}

// --follow: the run's shipper (store::BackgroundShipper) in its foreground mode, on this thread,
// until SIGINT/SIGTERM/SIGHUP (util::InterruptSignals, the process's one way of taking them),
// which end its wait at once. Each pass that shipped something, or worked again after failures,
// is one line; the first failure of a series is one note.
void follow(const SyncOptions& options, const GlobalOptions& globals, const std::string& location, bool local_exists) {
  if (!local_exists) {
    std::cerr << fmt::format("expctl: note: waiting for {} ('expctl run' creates it)\n", options.from);
  }
  const util::InterruptSignals signals;
  store::BackgroundShipper shipper(
      store::BackgroundShipper::foreground, options.from, globals.db_path,
      [&location](const store::BackgroundShipper::Pass& pass) {
        if (pass.problem) {
          if (pass.first_failure) {
            std::cerr << fmt::format("expctl: note: cannot ship now ({}); retrying with backoff up to {} s\n",
                                     *pass.problem, store::ShipPacer::k_most_retry.count() / 1000);
          }
        } else if (pass.recovered || pass.report.points_shipped > 0 || pass.report.runs_shipped > 0) {
          std::cerr << fmt::format("expctl: shipped {} point(s) of {} run(s) to {}\n", pass.report.points_shipped,
                                   pass.report.runs_shipped, location);
        }
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(options.interval_s)));
  const store::ShipReport shipped = shipper.follow(&signals);
  std::cerr << fmt::format(
      "expctl: sync --follow stopped: {} point(s) shipped to {} in {} batch(es) since it started\n",
      shipped.points_shipped, location, shipped.batches);
}

void run_sync(SyncOptions options, GlobalOptions& globals) {
  check_server(globals);
  EXPCTL_CHECK(options.run.empty() || (!options.follow && !options.status), util::UsageError,
               "sync --run ships one run once: leave out --follow and --status with it");
  std::optional<store::Store> local = open_node_store(globals, options.from);
  options.from = options.from.empty() ? globals.local_db : options.from;
  store::Store server = open_store(globals, options.status ? store::OpenMode::read_only : store::OpenMode::read_write);
  if (!local && !options.follow) {  // a new node: the server's tables were created (or migrated) all the same
    if (options.format != "text") {
      print_report(options, {}, {}, server.location());
    } else {
      std::cout << fmt::format("nothing to ship: this node has no store at {} yet; {} is ready\n", options.from,
                               server.location());
    }
    return;
  }
  const bool local_exists = local.has_value();
  if (!options.follow) {
    store::ShipOptions ship_options;
    if (!options.run.empty()) {
      ship_options.run_id = local->find_run(options.run).id;
    }
    const auto report = options.status ? store::ShipReport{} : store::ship(*local, server, ship_options);
    print_report(options, report, store::ship_lag(*local, server), server.location());
    return;
  }
  const std::string location = server.location();
  local.reset();  // the shipper opens its own connections: none is held idle beside them
  (void)store::Store(std::move(server));
  follow(options, globals, location, local_exists);
  globals.result = util::ExitCode::interrupted;
}

void setup_sync(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<SyncOptions>();
  CLI::App* command = app.add_subcommand(
      "sync",
      "Ship this node's store to the team's PostgreSQL server (--db): the runs, ranks, artifacts'\n"
      "records, tags and every metric point the server lacks, in batches of one transaction each\n"
      "(progress is recorded in the same transaction, so a crash or a replay never loses or\n"
      "duplicates a point). `expctl run` does the same on a thread while it trains; use sync for\n"
      "stores written offline, before the server existed, or while it was away. Prints how far the\n"
      "server is behind afterwards. --follow keeps shipping, retrying with backoff while the server\n"
      "is away, until Ctrl-C (exit 130). On a node with no store yet, sync readies the server's\n"
      "tables and ships nothing, and --follow waits for the node's first run.\n"
      "Example: EXPCTL_DB=postgresql://alice@db.example/expctl expctl sync --from results/expctl.db");
  command->add_option("--from", options->from, "The node-local SQLite store to ship (default: --local-db)");
  command->add_option("--run", options->run, "Ship only this run (an id or a unique prefix; not with --follow)")
      ->option_text("RUN");
  command->add_flag("--follow", options->follow, "Keep shipping every --interval seconds until interrupted");
  command->add_option("--interval", options->interval_s, "Seconds between passes with --follow (default 2)")
      ->check(CLI::Range(0.05, 3600.0));
  command->add_flag("--status", options->status, "Ship nothing: only say how far the server is behind");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_sync(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(sync, 46, setup_sync);

}  // namespace expctl::cli
