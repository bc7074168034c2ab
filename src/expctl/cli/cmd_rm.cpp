// `expctl rm RUN...`: deletes runs from the store, rows and folders.

#include <iostream>
#include <set>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_cleanup.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

namespace {

struct RmOptions {
  std::vector<std::string> selectors;
  bool dry_run = false;
  bool force = false;
  std::string format = "text";
};

// Every run the selectors name, each once; all of them checked before anything is removed.
std::vector<store::RunRecord> runs_to_remove(const store::Store& db, const RmOptions& options) {
  std::vector<store::RunRecord> runs;
  std::set<std::string> seen;
  for (const std::string& selector : options.selectors) {
    for (store::RunRecord& run : compare::resolve_group(db, selector)) {
      if (seen.insert(run.id).second) {
        runs.push_back(std::move(run));
      }
    }
  }
  for (const store::RunRecord& run : runs) {
    if (run.status == store::RunStatus::running) {
      throw util::UsageError(fmt::format(
          "run {} is running (owner {}): stop it first (Ctrl-C in its terminal), then remove it; nothing was removed",
          run.id, run.owner.value_or("?")));
    }
    if (run.status == store::RunStatus::queued) {
      throw util::UsageError(
          fmt::format("run {} is queued for its Slurm job: `expctl cancel {}` first, then remove "
                      "it; nothing was removed",
                      run.id, run.id));
    }
    if (const std::string tag = api::baseline_tag(run); !tag.empty() && !options.force) {
      throw util::UsageError(fmt::format(
          "run {} is a baseline ({}), which compare and nightly read: set another one first (expctl baseline set RUN) "
          "or pass --force; nothing was removed",
          run.id, tag));
    }
  }
  return runs;
}

void run_rm(const RmOptions& options, const GlobalOptions& globals) {
  store::Store db = open_store(globals, options.dry_run ? store::OpenMode::read_only : store::OpenMode::read_write);
  const auto runs = runs_to_remove(db, options);
  const bool json = options.format == "json";
  const auto removals = api::remove_runs(db, runs, options.dry_run);
  report_removals(db, removals, options.dry_run, "rm", json);
}

void setup_rm(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<RmOptions>();
  CLI::App* command = app.add_subcommand(
      "rm",
      "Delete runs from the store: their rows (ranks, metrics, artifacts, tags) and their run folders\n"
      "(logs, checkpoints, model). RUN is any selector (docs/compare.md, Selecting runs): an id or prefix,\n"
      "@latest, tag:NAME, all:tag:NAME for every run with a tag... Every run is checked before any is\n"
      "removed: a running run is refused, and so is a baseline unless --force. The database is compacted\n"
      "(VACUUM) when that gives back at least 4 MiB or a quarter of it. To clean by age or status: expctl gc.\n"
      "Examples:\n"
      "  expctl rm 20261201-101530-3fa9c2\n"
      "  expctl rm all:tag:ab:ab-20261201-101530 --dry-run");
  command->add_option("run", options->selectors, "Runs to delete (selectors)")->required()->option_text("RUN...");
  command->add_flag("--dry-run", options->dry_run, "List what would be removed and its size; remove nothing");
  command->add_flag("--force", options->force, "Remove a baseline too");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_rm(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(rm, 38, setup_rm);

}  // namespace expctl::cli
