// `expctl gc`: reclaims space: old or failed runs (when asked), the checkpoints of completed runs,
// orphaned run folders; then compacts the database where that pays.

#include <charconv>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_cleanup.hpp"
#include "expctl/cli/support_store.hpp"
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

// The options as gc's request; a bad --status or --older-than is a usage error.
api::GcRequest gc_request(const GcOptions& options) {
  api::GcRequest request{.keep_tags = options.keep_tags,
                         .include_tagged = options.include_tagged,
                         .include_baselines = options.include_baselines,
                         .keep_checkpoints = options.keep_checkpoints,
                         .dry_run = options.dry_run};
  for (const std::string& text : options.statuses) {
    const auto status = store::parse_run_status(text);
    if (!status || !store::has_ended(*status)) {
      throw util::UsageError(fmt::format(
          "--status {}: give completed, failed, interrupted, diverged or lost (a running or queued run is never "
          "collected)",
          text));
    }
    request.statuses.push_back(*status);
  }
  if (!options.older_than.empty()) {
    request.older_than = parse_age(options.older_than);
  }
  return request;
}

void run_gc(const GcOptions& options, const GlobalOptions& globals) {
  store::Store db = open_store(globals, options.dry_run ? store::OpenMode::read_only : store::OpenMode::read_write);
  const std::vector<api::Removal> removals = api::collect_garbage(db, gc_request(options));
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
