// `expctl baseline set RUN`: accepts a run as the new baseline of its spec (tag baseline:<name>),
// the run that `expctl nightly` and `compare tag:baseline:<name>` compare against.
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/selector.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {
namespace {

struct BaselineOptions {
  std::string run;
  std::string format = "text";
};

void run_baseline_set(const BaselineOptions& options, GlobalOptions& globals) {
  store::Store db = open_store(globals, store::OpenMode::read_write);
  const store::RunRecord run = compare::resolve_one(db, options.run, "baseline set");
  if (run.status != store::RunStatus::completed) {
    throw util::CompareError(
        fmt::format("run {} is {}: only a completed run can be a baseline", run.id, store::to_string(run.status)));
  }
  // One baseline per spec name: the tag moves, so tag:baseline:<name> always names one run.
  const std::string tag = "baseline:" + run.name;
  std::vector<std::string> previous;
  for (const auto& other : db.list_runs({.tag = tag})) {
    if (other.id != run.id && db.remove_tag(other.id, tag)) {
      previous.push_back(other.id);
    }
  }
  db.add_tag(run.id, tag);
  if (options.format == "json") {
    nlohmann::json document = json_envelope("baseline");
    document["tag"] = tag;
    document["run"] = run.id;
    document["previous"] = previous;
    print_json(document);
    return;
  }
  std::cout << util::terminal_safe(
      fmt::format("{} is now the baseline of {} (tag {}){}\n", run.id, run.name, tag,
                  previous.empty() ? "" : fmt::format("; was {}", fmt::join(previous, ", "))));
}

void setup_baseline(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  CLI::App* command = app.add_subcommand("baseline", "Manage the baselines that compare and nightly use");
  command->require_subcommand(1);
  auto options = std::make_shared<BaselineOptions>();
  CLI::App* set = command->add_subcommand(
      "set",
      "Accept a completed run as the new baseline of its spec: tags it baseline:<spec name> and removes\n"
      "that tag from the previous baseline. Example: expctl baseline set @latest");
  set->add_option("run", options->run, "The run (any selector that names one run)")->required();
  add_format_option(set, options->format);
  set->callback([options, globals] { run_baseline_set(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(baseline, 34, setup_baseline);

}  // namespace expctl::cli
