// `expctl show RUN`: everything the store knows about one run.

#include <iostream>
#include <optional>

#include "expctl/api/runs.hpp"
#include "expctl/api/show.hpp"
#include "expctl/cli/command.hpp"
#include "expctl/cli/support_slurm.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {

namespace {

struct ShowOptions {
  std::string selector;
  std::string format = "text";
  std::string series;  ///< --series NAME: that metric's every point instead
};

/// A run on a team server: how it got there, and how many of this node's points of it are not
/// (nullopt for a SQLite store). A fact of this node's stores, so the CLI's own field of `show`.
std::optional<api::Shipping> shipping_of(store::Store& db, const GlobalOptions& globals, const std::string& run_id) {
  if (store_is_file(globals)) {
    return std::nullopt;
  }
  auto shipped = store::shipped_run(db, run_id);
  const auto lag = node_lag(globals, db, run_id);
  const bool local = lag && lag->lag.runs_local > 0;  // this node has the run
  return api::Shipping{std::move(shipped), local ? std::optional(lag->lag.points_behind) : std::nullopt};
}

void run_show(const ShowOptions& options, const GlobalOptions& globals) {
  store::Store db = open_store(globals, store::OpenMode::read_only);
  if (!options.series.empty()) {
    EXPCTL_CHECK(options.format == "json", util::UsageError, "--series gives JSON only: add --format json");
    print_json(api::series_document(db, compare::resolve_one(db, options.selector, "show").id, options.series));
    return;
  }
  const api::RunDetails details = api::read_details(db, options.selector, "show");
  const auto shipping = shipping_of(db, globals, details.run.id);
  const auto ended_jobs = ended_slurm_jobs({details.run});
  if (options.format == "json") {
    nlohmann::json document = api::details_json(details);
    document["shipped"] = shipping ? api::shipping_json(*shipping) : nlohmann::json(nullptr);
    document["slurm_job_ended"] =
        ended_jobs.empty() ? nlohmann::json(nullptr)
                           : nlohmann::json{{"job", ended_jobs[0].job}, {"job_state", ended_jobs[0].job_state}};
    print_json(document);
    return;
  }
  std::cout << util::terminal_safe(api::details_text(details, shipping));  // stored strings, shown raw before
  for (const auto& ended : ended_jobs) {
    std::cout << "note: " << ended_slurm_job_text(ended) << '\n';
  }
}

void setup_show(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* command =
      app.add_subcommand("show",
                         "Show everything recorded about one run: its fields, tags, ranks, artifacts, metrics\n"
                         "(points, first and last value) and the summary the runner wrote.\n"
                         "RUN: a run id or unique prefix (see 'expctl list'), @latest, @latest~N, tag:NAME (the\n"
                         "newest run with the tag), spec:HASHPREFIX or a spec file (the newest run of it).\n"
                         "Text output groups the resolved hyperparameters by section and marks defaults; JSON\n"
                         "output adds the environment fingerprint (\"environment\", null when none was taken) and\n"
                         "the spec's values (\"spec\".\"values\").\n"
                         "Examples:\n"
                         "  expctl show 20261129-223118-3fa9c2\n"
                         "  expctl show 20261129-2231 --format json");
  command->add_option("run", options->selector, "Any selector that names one run (see above)")->required()->option_text("RUN");
  command
      ->add_option("--series", options->series,
                   "Print every point of this metric instead (rank, step, value; every rank, full\n"
                   "resolution; with --format json)")
      ->option_text("NAME");
  add_format_option(command, options->format);
  command->callback([options, globals] { run_show(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(show, 31, setup_show);

}  // namespace expctl::cli
