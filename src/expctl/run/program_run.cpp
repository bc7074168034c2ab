// A program's ranks when more than one `expctl` supervises them (program_gather.hpp): several
// nodes started with --nnodes, or one `expctl run` per rank under an external launcher
// (program_external.cpp). At the end, every supervisor but the recording one hands its ranks'
// steps over, and the recording one takes them into the run of record.

#include <map>

#include <fmt/format.h>

#include "expctl/run/lifecycle.hpp"
#include "expctl/run/program_gather.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/process_identity.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::run::lifecycle {
namespace {

using nlohmann::json;

// What a program run's summary says about its metrics (the built-in trainer always reports).
json program_summary(std::int64_t steps_logged, std::int64_t lines_skipped) {
  json program = {{"steps_logged", steps_logged}, {"lines_skipped", lines_skipped}};
  if (steps_logged == 0) {
    program["note"] = "the program logged no metrics (docs/program.md: expctl.log or the metrics protocol)";
  }
  return {{util::summary_key::program, program}};
}

// The recording supervisor takes every other part (waiting up to `timeout` in all) and stores it
// as its ranks' own: the run of record then holds every rank's steps and how each rank ended. A
// rank of another part that failed fails a run whose own ranks completed; a part that never came
// is named in the summary.
json take_parts(const Handover& handover, const store::RunRecord& run, Recorder& recorder, RunObserver& observer,
                int world_size, Verdict& verdict, std::int64_t& steps, std::int64_t& skipped,
                std::chrono::seconds timeout) {
  const std::string& run_id = run.id;
  std::vector<std::string> missing;
  std::vector<ProgramPart> parts;
  if (handover.parts <= 1) {
    return json::object();
  }
  std::optional<train::plugin::StoreClient> client;
  try {
    client.emplace(handover.host, handover.port, timeout);
  } catch (const util::Failure&) {
  }
  const auto deadline = SteadyClock::now() + timeout;
  for (int index = 1; index < handover.parts; ++index) {
    const auto left = std::max(std::chrono::milliseconds(1),
                               std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()));
    const auto text = client ? client->get(handover.prefix + part_key(index), left) : std::nullopt;
    if (text) {
      auto part = checked_part(*text, index, world_size);
      if (part) {
        parts.push_back(std::move(*part));
        continue;
      }
      observer.note(fmt::format("warning: refused what {} {} handed over on the job's store: {}; its steps are not "
                                "recorded",
                                handover.noun, index, part.error()),
                    true);
    }
    missing.push_back(std::to_string(index));
  }
  for (const auto& part : parts) {
    steps += part.steps_logged;
    skipped += part.lines_skipped;
    if (!part.log.empty()) {  // an external launcher's rank: its log joins the run's
      (void)util::write_file_atomic(run.run_dir / "logs" / fmt::format("rank-{}.log", part.index), part.log);
    }
    for (std::size_t first = 0; first < part.points.size();) {
      std::size_t last = first;
      while (last < part.points.size() && part.points[last].rank == part.points[first].rank &&
             part.points[last].step == part.points[first].step) {
        ++last;
      }
      recorder.on_logged_step(part.points[first].rank, part.points[first].step,
                              {part.points.begin() + static_cast<std::ptrdiff_t>(first),
                               part.points.begin() + static_cast<std::ptrdiff_t>(last)});
      first = last;
    }
    recorder.post([ranks = part.ranks, run_id](store::Store& store) {
      std::map<int, bool> known;
      for (const auto& rank : store.ranks(run_id)) {
        known[rank.rank] = true;
      }
      for (const auto& rank : ranks) {
        if (!known.contains(rank.rank)) {
          store.add_rank(run_id, store::RankRecord{.rank = rank.rank, .host = rank.host, .pid = rank.pid});
        }
        store.update_rank(run_id, rank.rank, rank.status, rank.exit_code, rank.signal);
      }
    });
    if (!part.root_cause.empty() && verdict.status == store::RunStatus::completed) {
      verdict = {store::RunStatus::failed, util::ExitCode::run_failed, part.root_cause};
    }
  }
  json summary = json::object();
  if (!missing.empty()) {
    summary["parts_missing"] =
        fmt::format("{}(s) {} handed over no steps within {} s{}", handover.noun, util::join(missing, ", "),
                    timeout.count(), handover.noun == "node" ? " (they are in those nodes' own stores)" : "");
  }
  return summary;
}

// A local module the program imported that no program.files pattern covers: its content is not in
// the spec hash, so an edit to it would train another experiment under the same hash. Named at the
// end; with --strict-inputs a run that completed fails (exit 2: the spec's input list is the fix).
void check_unhashed_modules(const std::vector<std::string>& unhashed, bool strict, RunObserver& observer,
                            Verdict& verdict) {
  if (unhashed.empty()) {
    return;
  }
  const std::string what = fmt::format(
      "the program imported local module(s) that no program.files pattern covers, so their content is "
      "not in the spec hash: {}; add them to program.files (a glob such as \"lib/*.py\" covers a folder)",
      util::join(unhashed, ", "));
  if (strict && verdict.status == store::RunStatus::completed) {
    verdict = {store::RunStatus::failed, util::ExitCode::usage, what + " (--strict-inputs)"};
    return;
  }
  observer.note("warning: " + what, true);
}
}  // namespace

// What this supervisor's program ranks did, to hand over to the one that records the run.
ProgramPart part_of(int index, const ProgramRecords& records, const std::optional<launch::Outcome>& outcome,
                    const Verdict& verdict) {
  ProgramPart part;
  part.index = index;
  part.points = records.points();
  part.steps_logged = records.steps_logged();
  part.lines_skipped = records.lines_skipped();
  part.root_cause = verdict.status == store::RunStatus::completed ? std::string() : verdict.root_cause;
  for (const auto& exit : outcome ? outcome->ranks : std::vector<launch::RankExit>{}) {
    part.ranks.push_back(
        {exit.rank, rank_status(exit), exit.exit_code >= 0 ? std::optional<int>(exit.exit_code) : std::nullopt,
         exit.signal != 0 ? std::optional<int>(exit.signal) : std::nullopt, util::host_name(), exit.pid});
  }
  return part;
}

// A supervisor other than the recording one: its part goes to the job's store. Its own records
// stay where they are (a node's own store), so a handover that fails costs a warning, not the run.
void hand_over(const Handover& handover, const ProgramPart& part, RunObserver& observer) {
  try {
    train::plugin::StoreClient client(handover.host, handover.port, handover.timeout);
    client.set(handover.prefix + part_key(handover.index), part_text(part));
  } catch (const util::Failure& error) {
    observer.note(fmt::format("warning: cannot hand {} steps of this supervisor's ranks to the run of record: {}",
                              part.steps_logged, error.what()),
                  true);
  }
}

// Several nodes started with --nnodes: node 0 hosts the store the program's ranks join (as for
// built-in runs, so no rank races another to bind it), and every node hands its ranks' steps to
// node 0 at the end. One node: the program's rank 0 hosts it, nothing is handed over.
void prepare_program_nodes(Invocation& invocation) {
  auto& node = invocation.resolved.node;
  if (node.nnodes <= 1) {
    return;
  }
  train::plugin::preload();  // the store's client and server live in the training plugin
  invocation.rendezvous = host_rendezvous(node, timeout_of(invocation.resolved.spec));
  invocation.store_host = StoreHost::expctl;
  invocation.handover = Handover{node.master_addr,
                                 static_cast<std::uint16_t>(node.master_port),
                                 node.node_rank,
                                 node.nnodes,
                                 "node",
                                 "",
                                 timeout_of(invocation.resolved.spec)};
}

json end_program(const Invocation& invocation, const ProgramRecords& records, Recorder& recorder,
                 const std::optional<launch::Outcome>& outcome, Verdict& verdict) {
  RunObserver& observer = *invocation.observer;
  std::int64_t steps = records.steps_logged();
  std::int64_t skipped = records.lines_skipped();
  json handover_summary = json::object();
  if (invocation.handover) {
    const auto& handover = *invocation.handover;
    if (handover.index != 0) {
      hand_over(handover, part_of(handover.index, records, outcome, verdict), observer);
    } else {
      // An interrupted job's other parts come within moments (their launcher stops them too).
      const auto timeout =
          verdict.status == store::RunStatus::interrupted ? std::chrono::seconds(10) : handover.timeout;
      handover_summary = take_parts(handover, invocation.run, recorder, observer, invocation.plan.world_size, verdict,
                                    steps, skipped, timeout);
    }
  }
  const auto unhashed = unhashed_modules(records.modules(), invocation.resolved.spec, invocation.resolved.spec_file);
  check_unhashed_modules(unhashed, invocation.strict_inputs, observer, verdict);
  json summary = program_summary(steps, skipped);
  if (!unhashed.empty()) {
    summary[util::summary_key::program]["unhashed_modules"] = unhashed;
  }
  summary[util::summary_key::program].update(handover_summary);
  if (invocation.external) {
    summary[util::summary_key::world_size] = invocation.plan.world_size;  // the launcher's, whatever the spec says
  }
  return summary;
}

}  // namespace expctl::run::lifecycle
