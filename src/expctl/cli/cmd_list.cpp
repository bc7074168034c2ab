// `expctl list`: the runs in the store, newest first, as an aligned table or JSON.

#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_slurm.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::cli {

namespace {

/// Characters of the spec hash shown in the table: enough to tell specs apart, short enough to read.
constexpr size_t k_short_hash = 12;

struct ListOptions {
  std::string status;
  std::string tag;
  std::string spec_prefix;
  size_t limit = 0;
  std::string format = "text";
  bool details = false;
};

store::RunFilter make_filter(const ListOptions& options) {
  store::RunFilter filter;
  if (!options.status.empty()) {
    filter.status = store::parse_run_status(options.status);  // CLI11 has checked the name
  }
  if (!options.tag.empty()) {
    filter.tag = options.tag;
  }
  filter.spec_hash_prefix = options.spec_prefix;
  filter.limit = options.limit;
  return filter;
}

void print_table(const std::vector<store::RunRecord>& runs) {
  util::TextTable table({"id", "status", "name", "spec", "started (UTC)", "duration", "tags"});
  table.set_align(5, util::TextTable::Align::right);
  for (const store::RunRecord& run : runs) {
    table.add_row({run.id, std::string(store::to_string(run.status)), run.name, run.spec_hash.substr(0, k_short_hash),
                   short_time(run.started_at), duration_text(run.duration_seconds()), util::join(run.tags, ",")});
  }
  std::cout << table.render();
}

void run_list(const ListOptions& options, const GlobalOptions& globals) {
  std::optional<store::Store> db = open_store_if_present(globals);
  std::vector<store::RunRecord> runs;
  if (db) {
    runs = db->list_runs(make_filter(options));
  }
  const std::optional<NodeLag> lag = db ? node_lag(globals, *db) : std::nullopt;
  const auto ended_jobs = ended_slurm_jobs(runs);
  if (options.format == "json") {
    nlohmann::json document = api::list_document(db ? &*db : nullptr, globals.db_path, runs);
    document["slurm_job_ended"] = nlohmann::json::array();
    for (const auto& ended : ended_jobs) {
      document["slurm_job_ended"].push_back(
          {{"run_id", ended.run_id}, {"job", ended.job}, {"job_state", ended.job_state}});
    }
    if (db && options.details) {
      api::add_list_details(*db, document, runs);
    }
    document["node_lag"] = node_lag_json(lag);
    print_json(document);
    if (!db) {
      std::cerr << "expctl: note: " << missing_database_hint(globals) << '\n';
    }
    return;
  }
  if (!db) {
    std::cout << "no runs: " << missing_database_hint(globals) << '\n';
  } else if (runs.empty()) {
    std::cout << "no runs match\n";
  } else {
    print_table(runs);
  }
  for (const auto& ended : ended_jobs) {
    std::cout << "note: " << ended_slurm_job_text(ended) << '\n';
  }
  if (db) {
    // What the store costs on disk, and the command that reclaims it.
    std::cout << fmt::format("store {}: database {}, run folders {} (expctl gc --dry-run lists what can go)\n",
                             api::store_label(*db),
                             bytes_text(db->database_bytes()), bytes_text(db->folders_bytes()));
  }
  if (lag) {
    std::cout << node_lag_text(*lag) << '\n';
  }
}

void setup_list(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* command = app.add_subcommand(
      "list",
      "List the recorded runs, newest first: id, status, name, spec hash (first 12 hex digits),\n"
      "start time (UTC), duration and tags. Filters combine (all must match).\n"
      "A database that does not exist yet lists no runs (exit 0). The store's size on disk\n"
      "follows: the database and the run folders (reclaim space with expctl gc). With a team\n"
      "server as --db, a last line says how far the server is behind this node's store (--local-db).\n"
      "A run of `run --slurm` that reads queued or running while Slurm says its job has ended\n"
      "gets a note naming the job's state and the commands that set the run right.\n"
      "Examples:\n"
      "  expctl list\n"
      "  expctl list --status failed --limit 5\n"
      "  expctl list --tag baseline --spec 3fa9c2 --format json\n"
      "  expctl --db /data/results/expctl.db list");
  std::vector<std::string> statuses(std::begin(store::k_run_status_names), std::end(store::k_run_status_names));
  command->add_option("--status", options->status, "Only runs with this status: " + util::join(statuses, "|"))
      ->check(CLI::IsMember(statuses));
  command->add_option("--tag", options->tag, "Only runs carrying this tag");
  command
      ->add_option("--spec", options->spec_prefix,
                   "Only runs of specs whose hash starts with HASHPREFIX (lowercase hex)")
      ->option_text("HASHPREFIX");
  command->add_option("--limit", options->limit, "Show at most N runs (0: all)")
      ->option_text("N")
      ->check(CLI::NonNegativeNumber);
  command->add_flag(
      "--details", options->details,
      "With --format json: each run's summary too, and each listed spec's values once (docs/analysis.md)");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_list(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(list, 30, setup_list);

}  // namespace expctl::cli
