// `expctl cancel RUN`: stops a run that a Slurm job holds (`run --slurm`), queued or running.
// The job is cancelled with scancel; a running job's expctl checkpoints and records the run
// `interrupted` itself (its SIGTERM read against the job's state: run/slurm_job.cpp), and a run
// whose job never started is recorded `interrupted` here, so no run is left `queued` for a job
// that will never come. A job that has ended already (`list` and `show` note such runs) is not
// cancelled again: the run it left queued or running is recorded `interrupted` here.

#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/launch/slurm_job.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/util/error.hpp"

namespace expctl::cli {
namespace {

struct CancelOptions {
  std::string selector;
  double wait_s = 60.0;
};

// The run as it is once its job's expctl has recorded the stop, or once the job has ended with the
// run still queued (it never started it), or after `wait`.
store::RunRecord wait_for_end(const store::Store& db, const std::string& id, const launch::slurm::Client& client,
                              const std::string& job, std::chrono::duration<double> wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  store::RunRecord run = db.run(id).value();
  while (!store::has_ended(run.status) && std::chrono::steady_clock::now() < deadline) {
    if (run.status == store::RunStatus::queued) {
      const auto info = client.query(job);
      if (!info || launch::slurm::is_final(info->state)) {
        return db.run(id).value();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    run = db.run(id).value();
  }
  return run;
}

// With a team server as --db, the run a Slurm job holds is this node's (the job records into the
// shared --local-db and ships): it is cancelled there, and what that records is shipped.
store::Store store_of_jobs(const GlobalOptions& globals) {
  return store_is_file(globals) ? open_store(globals, store::OpenMode::read_write) : store_opener(globals)();
}

void run_cancel(const CancelOptions& options, GlobalOptions& globals) {
  store::Store db = store_of_jobs(globals);
  const store::RunRecord run = db.find_run(options.selector);
  const auto job = run::slurm_job_of(run);
  if (store::has_ended(run.status)) {
    throw util::UsageError(fmt::format("run {} is {}: nothing to cancel", run.id, store::to_string(run.status)));
  }
  if (!job) {
    throw util::UsageError(fmt::format(
        "run {} is not a Slurm job's (no slurm-job tag): stop it with Ctrl-C in its terminal or SIGTERM to its "
        "expctl ({}); it checkpoints and ends interrupted",
        run.id, run.owner.value_or("owner unknown")));
  }
  const launch::slurm::Client client;
  const auto before = client.query(*job);
  // A job that has ended already (scancel'ed by hand, failed before expctl started, its node lost)
  // leaves the run as its expctl last recorded it, or never started it: recorded here.
  const bool ended = !before || launch::slurm::is_final(before->state);
  const std::string job_said = before ? fmt::format("Slurm job {} had ended ({})", *job, before->state_text)
                                      : fmt::format("Slurm no longer knew job {}", *job);
  if (!ended) {
    client.cancel(*job);
    if (!globals.quiet) {
      std::cerr << fmt::format("cancelled Slurm job {}; waiting up to {:.0f} s for run {} to record its stop\n", *job,
                               options.wait_s, run.id);
    }
  }
  store::RunRecord now =
      ended ? run : wait_for_end(db, run.id, client, *job, std::chrono::duration<double>(options.wait_s));
  const auto record_stop = [&](const store::RunRecord& each, const std::string& cause) {
    db.finish_run(each.id, store::RunStatus::interrupted, util::to_int(util::ExitCode::interrupted), cause);
  };
  const std::string resume_hint = fmt::format("`expctl resume {} --slurm` continues it", run.id);
  if (now.status == store::RunStatus::queued) {
    // The job never started it (or was cancelled between a requeue and its next start).
    record_stop(now, ended
                         ? fmt::format("{} without starting it; recorded by `expctl cancel`; {}", job_said, resume_hint)
                         : fmt::format("cancelled with `expctl cancel` while waiting for Slurm job {}; `expctl "
                                       "resume {} --slurm` submits it again",
                                       *job, now.id));
  } else if (ended && now.status == store::RunStatus::running) {
    record_stop(now, fmt::format("{} and its expctl recorded no stop (killed, or its node failed); recorded by "
                                 "`expctl cancel`; {} from its last checkpoint",
                                 job_said, resume_hint));
  }
  now = db.run(now.id).value();
  // Of several nodes, the other nodes' runs waiting for the job (after a requeue) end with it, and
  // those a dead job left running.
  for (const auto& node : run::slurm_node_runs(db, run.id)) {
    if (node.status == store::RunStatus::queued || (ended && node.status == store::RunStatus::running)) {
      record_stop(
          node, ended ? fmt::format("{}; recorded by `expctl cancel {}`", job_said, run.id)
                      : fmt::format("cancelled with `expctl cancel {}` while waiting for Slurm job {}", run.id, *job));
    }
  }
  if (now.status == store::RunStatus::running) {
    throw util::LaunchError(
        fmt::format("run {} is still running {:.0f} s after its job {} was cancelled: see `expctl "
                    "show {}` and `squeue -j {}`",
                    now.id, options.wait_s, *job, now.id, *job));
  }
  ship_now(globals);  // with a team server: what was recorded here
  std::cout << fmt::format("run {}: {}{}\n", now.id, store::to_string(now.status),
                           now.root_cause.empty() ? "" : " (" + now.root_cause + ")");
}

void setup_cancel(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<CancelOptions>();
  CLI::App* command = app.add_subcommand(
      "cancel",
      "Cancel a run that a Slurm job holds (`expctl run --slurm`): scancel its job; a running run\n"
      "checkpoints and ends `interrupted`, a queued one is recorded `interrupted` at once. Either\n"
      "continues with `expctl resume RUN --slurm` (or `expctl resume RUN` here). A run whose job has\n"
      "ended already (scancel by hand, its node lost) is recorded `interrupted` without scancel.\n"
      "Example: expctl cancel @latest");
  command->add_option("run", options->selector, "The run: a run id or unique prefix, @latest, tag:NAME, ...")
      ->required()
      ->option_text("RUN");
  command->add_option("--wait", options->wait_s, "Seconds to wait for the run to record its stop (default 60)")
      ->check(CLI::Range(0.0, 3600.0));
  command->callback([options, globals] { run_cancel(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(cancel, 39, setup_cancel);

}  // namespace expctl::cli
