// `expctl gc`: reclaims space: old or failed runs (when asked), the checkpoints of completed runs,
// orphaned run folders; then compacts the database where that pays.

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_cleanup.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/env/version_pattern.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {

namespace {

struct GcOptions {
  std::string older_than;
  std::vector<std::string> statuses;
  std::vector<std::string> keep_tags;
  bool include_tagged = false;
  bool include_baselines = false;
  bool keep_checkpoints = false;
  bool dry_run = false;
  std::string format = "text";
};

/// "30d", "12h", "90m", "45s", "2w" as seconds; throws UsageError otherwise.
std::chrono::seconds parse_age(const std::string& text) {
  std::int64_t count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  const std::string unit(end, text.data() + text.size());
  constexpr std::pair<const char*, std::int64_t> k_units[] = {{"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400},
                                                               {"w", 7 * 86400}};
  for (const auto& [name, seconds] : k_units) {
    if (error == std::errc() && count >= 0 && unit == name) {
      return std::chrono::seconds(count * seconds);
    }
  }
  throw util::UsageError(fmt::format("--older-than {}: give a whole number and a unit, e.g. 30d, 12h, 90m, 2w", text));
}

// The spec's own `tags:` label every run of it (quickstart, mlp, ...): they protect nothing. The
// tags a run was given (--tag, ab:, sweep, nightly, drift:) do. Without the run's resolved.json
// every tag counts.
std::vector<std::string> spec_tags(const store::RunRecord& run) {
  std::ifstream in(run.run_dir / "resolved.json");
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> tags;
  if (document.is_object() && document.contains("spec") && document["spec"].is_object() &&
      document["spec"].contains("tags") && document["spec"]["tags"].is_array()) {
    for (const auto& tag : document["spec"]["tags"]) {
      if (tag.is_string()) {
        tags.push_back(tag.get<std::string>());
      }
    }
  }
  return tags;
}

bool keeps(const GcOptions& options, const store::RunRecord& run) {
  for (const std::string& tag : run.tags) {
    for (const std::string& pattern : options.keep_tags) {
      if (env::glob_match(pattern, tag)) {
        return true;
      }
    }
  }
  const auto labels = spec_tags(run);
  const bool tagged = std::any_of(run.tags.begin(), run.tags.end(), [&](const std::string& tag) {
    return !tag.starts_with("baseline:") && std::find(labels.begin(), labels.end(), tag) == labels.end();
  });
  return (!baseline_tag(run).empty() && !options.include_baselines) || (tagged && !options.include_tagged);
}

// Runs are removed only when --older-than or --status asks for them; running runs never.
std::vector<store::RunRecord> runs_to_remove(const store::Store& db, const GcOptions& options) {
  if (options.older_than.empty() && options.statuses.empty()) {
    return {};
  }
  std::vector<store::RunStatus> statuses;
  for (const std::string& text : options.statuses) {
    const auto status = store::parse_run_status(text);
    if (!status || *status == store::RunStatus::running) {
      throw util::UsageError(fmt::format(
          "--status {}: give completed, failed, interrupted, diverged or lost (a running run is never collected)",
          text));
    }
    statuses.push_back(*status);
  }
  std::optional<store::Clock::time_point> before;
  if (!options.older_than.empty()) {
    before = store::Clock::now() - parse_age(options.older_than);
  }
  std::vector<store::RunRecord> runs;
  for (store::RunRecord& run : db.list_runs()) {
    const bool status_matches = statuses.empty() ? run.status != store::RunStatus::running
                                                 : std::find(statuses.begin(), statuses.end(), run.status) != statuses.end();
    const auto started = store::parse_utc(run.started_at);
    const bool old_enough = !before || (started && *started < *before);
    if (status_matches && old_enough && !keeps(options, run)) {
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

// Checkpoints exist to resume a run, and a completed run cannot be resumed: their files go, and
// so do their artifact rows (the trained model, model.pt, stays).
std::vector<Removal> remove_checkpoints(store::Store& db, const std::vector<store::RunRecord>& removed_runs,
                                        bool dry_run) {
  std::vector<Removal> removals;
  for (const store::RunRecord& run : db.list_runs({.status = store::RunStatus::completed})) {
    if (std::any_of(removed_runs.begin(), removed_runs.end(), [&](const auto& other) { return other.id == run.id; })) {
      continue;
    }
    const auto folder = run.run_dir / "checkpoints";
    std::error_code error;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
      files.push_back(entry.path());
    }
    if (files.empty()) {
      continue;
    }
    Removal removal{"checkpoints of", run.id, fmt::format("{} file(s)", files.size()), 0};
    for (const auto& file : files) {
      removal.bytes += store::Store::bytes_under(file);
      if (!dry_run) {
        std::filesystem::remove_all(file, error);
      }
    }
    if (!dry_run) {
      for (const auto& artifact : db.artifacts(run.id)) {
        if (artifact.path.starts_with("checkpoints/")) {
          db.remove_artifact(run.id, artifact.path);
        }
      }
      db.remeasure_folder(run.id);  // the size `list` prints remembers the folder as it is now
    }
    removals.push_back(std::move(removal));
  }
  return removals;
}

std::vector<Removal> remove_orphans(const store::Store& db, bool dry_run) {
  std::vector<Removal> removals;
  for (const auto& folder : db.orphaned_folders()) {
    Removal removal{"orphaned folder", folder.string(), "no run of the store owns it", store::Store::bytes_under(folder)};
    if (!dry_run) {
      std::error_code error;
      std::filesystem::remove_all(folder, error);
      if (error) {
        removal.note = fmt::format("could not delete it: {}", error.message());
        removal.bytes = 0;
      }
    }
    removals.push_back(std::move(removal));
  }
  return removals;
}

void run_gc(const GcOptions& options, const GlobalOptions& globals) {
  store::Store db = open_store(globals, options.dry_run ? store::OpenMode::read_only : store::OpenMode::read_write);
  const auto runs = runs_to_remove(db, options);
  std::vector<Removal> removals = remove_runs(db, runs, options.dry_run);
  if (!options.keep_checkpoints) {
    for (auto& removal : remove_checkpoints(db, runs, options.dry_run)) {
      removals.push_back(std::move(removal));
    }
  }
  for (auto& removal : remove_orphans(db, options.dry_run)) {
    removals.push_back(std::move(removal));
  }
  if (!options.dry_run) {
    db.remember_folder_sizes();  // runs from before schema v5: `list` then walks none of them
  }
  const bool json = options.format == "json";
  report_removals(db, removals, options.dry_run, "gc", json);
}

void setup_gc(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<GcOptions>();
  CLI::App* command = app.add_subcommand(
      "gc",
      "Reclaim space in the store. Always: the checkpoints of completed runs (only a resume reads them,\n"
      "and a completed run is not resumed; model.pt stays) and orphaned run folders (no run of the store\n"
      "owns them, older than an hour). Runs themselves only when asked, by age (--older-than) and/or\n"
      "status (--status); running runs never, baselines and runs given tags (--tag, ab:, sweep, nightly;\n"
      "the spec's own tags: do not count) only with --include-baselines / --include-tagged, and\n"
      "--keep-tag keeps a tag's runs regardless.\n"
      "Then the database is compacted (VACUUM) when that gives back at least 4 MiB or a quarter of it.\n"
      "Start with --dry-run: it lists what would go and how many bytes. Where the store is: docs/store.md.\n"
      "Examples:\n"
      "  expctl gc --dry-run\n"
      "  expctl gc --status failed --status interrupted --status lost\n"
      "  expctl gc --older-than 30d --include-tagged --keep-tag 'night:*'");
  command->add_option("--older-than", options->older_than, "Remove runs started longer ago than this (30d, 12h, 2w)")
      ->option_text("AGE");
  command->add_option("--status", options->statuses,
                      "Remove runs with this status (repeatable: completed, failed, interrupted, diverged, lost)")
      ->option_text("STATUS");
  command->add_option("--keep-tag", options->keep_tags, "Keep runs with a tag matching this glob (repeatable)")
      ->option_text("TAG");
  command->add_flag("--include-tagged", options->include_tagged, "Let runs that carry tags go too");
  command->add_flag("--include-baselines", options->include_baselines, "Let baseline runs go too");
  command->add_flag("--keep-checkpoints", options->keep_checkpoints, "Leave completed runs' checkpoints alone");
  command->add_flag("--dry-run", options->dry_run, "List what would be removed and its size; remove nothing");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_gc(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(gc, 39, setup_gc);

}  // namespace expctl::cli
