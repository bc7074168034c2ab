#include "expctl/run/resume_checks.hpp"

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "expctl/compare/selector.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/ship.hpp"
#include "expctl/util/diagnostic.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {
namespace {

using store::RunStatus;

bool resumable(RunStatus status) {
  return status == RunStatus::interrupted || status == RunStatus::failed || status == RunStatus::lost;
}

// The error to give for a run this node's store does not hold (`local_error` says how the lookup
// failed), with the server's side: where the run was recorded, or that the server has no such run
// either; nullopt: `local_error` as it is.
std::optional<util::Failure> not_on_this_node(const store::Store& local, const std::string& selector,
                                              const util::Failure& local_error,
                                              const std::function<store::Store()>& open_team_store) {
  std::string server_text;
  std::optional<std::string> elsewhere;
  try {
    store::Store server = open_team_store();
    std::optional<store::RunRecord> there;
    try {
      there = compare::resolve_one(server, selector, "resume");
    } catch (const util::Failure& error) {
      server_text = fmt::format("and on the team store: {}", error.what());  // names the server and why
    }
    // The server's run is elsewhere only when this node's store lacks it by id: a lookup that
    // failed for another reason (a locked store) is that reason, said as it is.
    if (there && !local.run(there->id)) {
      const auto shipped = store::shipped_run(server, there->id);
      elsewhere = fmt::format(
          "run {} is not in this node's store {}, which resume reads (a run's checkpoints are on the node that ran "
          "it): the team store {} has it, {}: resume it there",
          there->id, local.location(), server.location(),
          shipped ? fmt::format("recorded on node {} (shipped {})", shipped->node, shipped->shipped_at)
                  : std::string("written there by no node's shipper (merged or recorded directly)"));
    }
  } catch (const util::Failure& error) {
    server_text = fmt::format("the team store could not be asked ({})", error.what());
  }
  if (elsewhere) {
    return util::Failure(*elsewhere, util::ExitCode::usage);
  }
  if (server_text.empty()) {
    return std::nullopt;
  }
  return util::Failure(fmt::format("{}; {}", local_error.what(), server_text), local_error.exit_code());
}

// "; the team store S shows it as lost: `expctl sync` ..." where the server sees `run` otherwise
// than this node's store; empty where it agrees or cannot be read.
std::string server_view(const store::RunRecord& run, const std::function<store::Store()>& open_team_store) {
  try {
    store::Store server = open_team_store();
    const auto there = server.run(run.id);
    if (!there) {
      return fmt::format("; the team store {} does not have it yet: `expctl sync` ships it", server.location());
    }
    if (there->status != run.status) {
      return fmt::format("; the team store {} shows it as {}: `expctl sync` brings the server up to date",
                         server.location(), store::to_string(there->status));
    }
  } catch (const util::Failure& error) {
    return fmt::format("; the team store could not be asked ({})", error.what());
  }
  return {};
}

}  // namespace

store::RunRecord find_resumable_run(const store::Store& local, const std::string& selector,
                                    const std::function<store::Store()>& open_team_store) {
  std::optional<store::RunRecord> run;
  try {
    run = compare::resolve_one(local, selector, "resume");
  } catch (const util::Failure& error) {
    if (!open_team_store) {
      throw;
    }
    if (auto said = not_on_this_node(local, selector, error, open_team_store)) {
      throw *said;
    }
    throw;
  }
  if (resumable(run->status)) {
    return std::move(*run);
  }
  if (run->status == RunStatus::diverged) {
    throw util::UsageError(
        fmt::format("run {} diverged ({}): resuming would repeat the same steps; change the spec "
                    "(e.g. --set optim.lr=...) and start a new run",
                    run->id, run->root_cause.substr(0, run->root_cause.find('\n'))));
  }
  if (!open_team_store) {
    throw util::UsageError(fmt::format("run {} is {}: only an interrupted, failed or lost run can be resumed", run->id,
                                       store::to_string(run->status)));
  }
  throw util::UsageError(
      fmt::format("run {} is {} in this node's store {}: only an interrupted, failed or lost run can be resumed{}",
                  run->id, store::to_string(run->status), local.location(), server_view(*run, open_team_store)));
}

void check_resumed_inputs(const store::Store& store, const store::RunRecord& run, const ResolvedRun& resolved) {
  const std::string folder = (run.run_dir / k_resolved_file).string();
  const std::string fix = fmt::format("put back what changed, or start a new run (expctl run {})",
                                      resolved.spec_file.empty() ? std::string("SPEC") : resolved.spec_file);
  std::optional<spec::Spec> again;
  try {
    // The values as the file holds them: a field that a migration of an older resolved.json filled
    // in (spec/resolved_file.hpp) was not in what the run's hash covered.
    again = spec::rehash_values(resolved.recorded_spec, resolved.spec_file);
  } catch (const util::DiagnosticError& error) {
    const auto& first = error.diagnostics().front();
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: {} (found checking {} against the spec hash the store holds for the run): {}",
        run.id, first.message, folder, fix));
  }
  if (again->hash() != run.spec_hash) {
    const auto recorded = store.spec(run.spec_hash);
    const auto changes =
        recorded ? spec::canonical_changes(recorded->canonical, *again) : std::vector<spec::HashChange>{};
    if (!changes.empty() && changes.front().kind == spec::HashChange::Kind::recipe) {
      throw util::UsageError(
          fmt::format("run {} cannot be resumed: {}, so what it would train cannot be checked "
                      "against the hash the store holds for it: start a new run (expctl run {})",
                      run.id, changes.front().text, resolved.spec_file));
    }
    std::string what = changes.empty() ? std::string("its files or its spec changed") : changes.front().text;
    for (std::size_t i = 1; i < changes.size() && i < 4; ++i) {
      what += "; " + changes[i].text;
    }
    if (changes.size() > 4) {
      what += fmt::format(" (and {} more)", changes.size() - 4);
    }
    const bool edited_folder = !changes.empty() && changes.front().kind == spec::HashChange::Kind::field;
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: {}{}: the store holds spec {} for it, this is spec {}, and resuming would train "
        "another experiment under the run's id; {}",
        run.id, what,
        edited_folder ? fmt::format(" ({} is not the spec the run was recorded with)", folder)
                      : std::string(" since the run started"),
        run.spec_hash.substr(0, 12), again->hash().substr(0, 12), edited_folder ? "start a new run" : fix));
  }
  // The ranks check each input against resolved.json's digests before reading it: those must be
  // the digests that gave the run's hash, or a file the store never hashed could pass.
  if (resolved.inputs != again->input_paths()) {
    throw util::UsageError(fmt::format(
        "run {} cannot be resumed: {}'s \"inputs\" are not the digests of the files its spec hash covers (the run "
        "folder was edited): start a new run",
        run.id, folder));
  }
}

}  // namespace expctl::run
