// `expctl merge SRC.db... --into DST.db`: runs recorded by other machines or Slurm array tasks,
// each in its own store, brought into one (SQLite must not be shared between hosts). The rules
// (idempotence, conflicts, sources never written) are store::merge_store's (store.hpp).

#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> sources;
  std::string into;
  bool runs_dir = false;
  std::string format = "text";
};

// One shape on both backends (docs/store.md, "merge --format json"): a server has no run folders
// to copy (empty lists) and no PRAGMA integrity_check (integrity null).
nlohmann::json result_json(const store::MergeResult& result) {
  return {{"source", result.source.string()},
          {"added", result.added},
          {"present", result.present},
          {"specs_added", result.specs_added},
          {"environments_added", result.environments_added},
          {"tags_added", result.tags_added},
          {"points_added", result.points_added},
          {"folders_copied", result.folders_copied},
          {"folders_missing", result.folders_missing}};
}

std::string result_line(const store::MergeResult& result, bool runs_dir, bool server) {
  if (server) {
    return fmt::format("merged {}: {} run(s) shipped ({} already there whole), {} point(s) sent",
                       result.source.string(), result.added.size(), result.present.size(), result.points_added);
  }
  std::string line = fmt::format("merged {}: {} run(s) added, {} already present", result.source.string(),
                                 result.added.size(), result.present.size());
  if (result.tags_added > 0) {
    line += fmt::format(", {} tag(s) added", result.tags_added);
  }
  if (runs_dir) {
    line += fmt::format(", {} run folder(s) copied", result.folders_copied.size());
    if (!result.folders_missing.empty()) {
      line += fmt::format(" ({} not in the source's runs/)", result.folders_missing.size());
    }
  }
  return line;
}

// A server takes sources through the shipper's idempotent path (store::merge_by_shipping): COPY
// into a staging table and INSERT ... ON CONFLICT DO NOTHING, so merging (or shipping) twice adds
// nothing; it has no integrity check of SQLite's to end with.
void run_merge(const MergeOptions& options, GlobalOptions& globals) {
  for (const std::string& source : options.sources) {  // before DST is created
    std::error_code error;
    EXPCTL_CHECK(std::filesystem::exists(source, error), util::StoreError, "{}: no such database: check the path",
                 source);
  }
  const bool server = store::parse_store_location(options.into).kind == store::StoreKind::postgresql;
  store::Store destination = store::Store::open(options.into, store::OpenMode::read_write);
  std::vector<store::MergeResult> results;
  for (const std::string& source : options.sources) {
    results.push_back(store::merge_store(destination, source, {.copy_run_folders = options.runs_dir && !server}));
    if (options.format == "text" && !globals.quiet) {
      std::cerr << result_line(results.back(), options.runs_dir, server) << '\n';
    }
  }
  const std::optional<std::string> integrity =
      server ? std::nullopt : std::optional(store::check_integrity(destination));
  if (options.format == "json") {
    nlohmann::json document = json_envelope("merge");
    document["into"] = destination.location();
    document["sources"] = nlohmann::json::array();
    for (const auto& result : results) {
      document["sources"].push_back(result_json(result));
    }
    document["integrity"] = integrity ? nlohmann::json(*integrity) : nlohmann::json(nullptr);
    print_json(document);
  } else if (server) {
    std::cout << fmt::format("{}: merged {} store(s)\n", destination.location(), options.sources.size());
  } else {
    std::cout << fmt::format("{}: integrity {}\n", options.into, *integrity);
  }
  EXPCTL_CHECK(!integrity || *integrity == "ok", util::StoreError, "{} failed its integrity check after the merge: {}",
               options.into, integrity.value_or(""));
}

void setup_merge(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<MergeOptions>();
  CLI::App* command = app.add_subcommand(
      "merge",
      "Bring the runs of other stores (other machines, Slurm array tasks) into one: specs,\n"
      "environments, runs, ranks, metrics, artifacts' records and tags, one transaction per source.\n"
      "Idempotent: a run already present with the same content is skipped (its missing tags are\n"
      "added), so merging twice changes nothing. A run id present in both with different content is\n"
      "refused by name, and nothing of that source is merged. Sources are only read (through a\n"
      "snapshot; an older schema is migrated in a temporary copy, never in place). Ends with\n"
      "PRAGMA integrity_check of DST.\n"
      "Example: expctl merge results/sweep-lr/task-*.db --into results/expctl.db --runs-dir");
  command->add_option("sources", options->sources, "Stores to read (SRC.db ...)")->required();
  command->add_option("--into", options->into,
                      "The store to merge into (created when missing); a PostgreSQL server\n"
                      "(postgresql://...) takes the sources through the shipper's idempotent path")
      ->required();
  command->add_flag("--runs-dir", options->runs_dir,
                    "Also copy each run's folder (logs, checkpoints, spec.json) from <SRC dir>/runs/<id> to\n"
                    "<DST dir>/runs/<id>; a folder already there is kept");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_merge(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(merge, 45, setup_merge);

}  // namespace expctl::cli
