#include "expctl/cli/support_slurm.hpp"

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "expctl/cli/support_observer.hpp"
#include "expctl/cli/support_result.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/launch/slurm_job.hpp"
#include "expctl/store/store.hpp"
#include "expctl/sweep_run/slurm_array.hpp"
#include "expctl/util/interrupt_signals.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::cli {

namespace fs = std::filesystem;

void add_slurm_options(CLI::App* command, SlurmSweepOptions& options) {
  command
      ->add_flag("--print-sbatch", options.print_sbatch,
                 "Print a Slurm job-array script (--array=0-N%K): task I runs point I with its own store\n"
                 "beside --db, to bring together afterwards with expctl merge")
      ->group("Slurm");
  command
      ->add_flag("--slurm", options.submit,
                 "Submit the points the store does not hold yet as one Slurm job array (that script, its\n"
                 "--array limited to those points; sbatch must reach a slurmctld) and print the job id")
      ->group("Slurm");
  command
      ->add_flag("--wait", options.wait,
                 "With --slurm: follow the array until every task has ended, then merge the tasks' stores\n"
                 "into --db (exit 1 when a task did not complete; Ctrl-C stops following, not the job)")
      ->group("Slurm");
  command
      ->add_option("--array-limit", options.sbatch.max_concurrent,
                   "The K of --array=...%K: tasks at once (default: all)")
      ->check(CLI::Range(1, 100000))
      ->group("Slurm");
  command
      ->add_option("--sbatch", options.sbatch.directives,
                   "One more #SBATCH line for --print-sbatch and --slurm, e.g. --sbatch=--partition=gpu\n"
                   "(repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Slurm");
}

namespace {

// Each task's store into the store (a SQLite file with its run folders; a team server through the
// shipper's idempotent path, the run folders staying beside the node-local store); a task that
// never started has none. Returns the runs added and the store's name (a password masked).
std::pair<size_t, std::string> merge_tasks(const sweep_run::ArraySubmission& submission,
                                           const sweep_run::StoreLocation& where, bool quiet) {
  store::Store destination = store::Store::open(where.db_path, store::OpenMode::read_write);
  size_t added = 0;
  for (const size_t point : submission.points) {
    const fs::path task = submission.store_dir / fmt::format("task-{}.db", point);
    if (fs::exists(task)) {
      added += store::merge_store(destination, task, {.copy_run_folders = where.db_is_file}).added.size();
    } else if (!quiet) {
      std::cerr << fmt::format("expctl: warning: task {} left no store ({})\n", point, task.string());
    }
  }
  sweep::mark_array_merged(submission.store_dir, submission.job);  // its runs are the store's now
  return {added, destination.location()};
}

}  // namespace

void submit_sweep(const sweep::Sweep& sweep, const std::string& file, const sweep_run::Execution& execution,
                  const sweep_run::StoreLocation& where, const SlurmSweepOptions& options, GlobalOptions& globals) {
  const launch::slurm::Client client;
  const auto submission = sweep_run::submit_array(sweep, file, execution, where, options.sbatch, client);
  if (!submission) {
    std::cout << fmt::format("sweep {}: nothing to submit: every point's runs are done{}\n", sweep.name,
                             execution.plan.in_array > 0
                                 ? " or held by a submitted Slurm array (expctl sweep FILE --dry-run shows its tasks)"
                                 : "");
    return;
  }
  const std::string merge_hint =
      fmt::format("expctl merge {}/task-*.db --into {} --runs-dir", submission->store_dir.string(),
                  where.db_is_file ? where.db_path : std::string("\"$EXPCTL_DB\""));
  std::cout << fmt::format("sweep {}: {} point(s) submitted as Slurm array job {} (tasks {}); script {}\n", sweep.name,
                           submission->points.size(), submission->job, sweep::array_list(submission->points),
                           submission->script.string());
  if (!options.wait) {
    std::cout << fmt::format("follow it: squeue -r -j {}; then bring its runs in: {}\n", submission->job, merge_hint);
    return;
  }
  util::InterruptSignals signals;  // Ctrl-C stops the following, not the job
  bool interrupted = false;
  const auto tasks = sweep_run::wait_for_array(
      client, *submission, std::chrono::seconds(2),
      [&globals](const std::string& line) {
        if (!globals.quiet) {
          std::cerr << line << '\n';
        }
      },
      [&] { return interrupted = interrupted || !signals.take().empty(); });
  if (interrupted) {
    std::cerr << fmt::format(
        "expctl: stopped following array job {}; it runs on (scancel {} stops it); "
        "bring its runs in afterwards: {}\n",
        submission->job, submission->job, merge_hint);
    globals.result = util::ExitCode::interrupted;
    return;
  }
  size_t completed = 0;
  for (const auto& task : tasks) {
    if (task.state == launch::slurm::JobState::completed) {
      ++completed;
    } else {
      std::cerr << fmt::format(
          "expctl: error: array task {} (point {}) ended {}{}; its output: {}\n", task.point, task.point,
          task.gone ? "out of Slurm's sight" : launch::slurm::state_name(task.state),
          task.exit_code ? fmt::format(", exit {}", *task.exit_code) : "",
          (submission->store_dir / fmt::format("slurm-{}_{}.out", submission->job, task.point)).string());
    }
  }
  const auto [added, into] = merge_tasks(*submission, where, globals.quiet);
  std::cout << fmt::format("array job {}: {} of {} task(s) completed; {} run(s) merged into {}\n", submission->job,
                           completed, tasks.size(), added, into);
  globals.result = completed == tasks.size() ? util::ExitCode::ok : util::ExitCode::run_failed;
}

void add_run_slurm_options(CLI::App* command, RunSlurmOptions& options) {
  command
      ->add_flag("--slurm", options.submit,
                 "Submit the run as a Slurm batch job instead of running it here: it is recorded `queued`\n"
                 "with its job id, the job trains it under expctl's supervisor on each of the spec's\n"
                 "distributed.nnodes nodes (node I>0 records a run of its own, tagged node-of:RUN), and a\n"
                 "requeue or preemption resumes it from its checkpoint under the same id (docs/slurm.md).\n"
                 "--db is a SQLite file on storage the nodes share, or a team server: then the job records\n"
                 "into --local-db (on shared storage too) and ships, as `expctl run` does")
      ->group("Slurm");
  command
      ->add_flag("--wait", options.wait,
                 "With --slurm: follow the run (queued, running, requeued) until it ends and exit with its\n"
                 "code (Ctrl-C stops following, not the job)")
      ->group("Slurm");
  command
      ->add_option("--time", options.job.time_limit, "With --slurm: the job's time limit (sbatch --time), e.g. 4:00:00")
      ->group("Slurm");
  command->add_option("--partition", options.job.partition, "With --slurm: the partition (sbatch --partition)")
      ->group("Slurm");
  command->add_option("--account", options.job.account, "With --slurm: the account (sbatch --account)")->group("Slurm");
  command
      ->add_option("--cpus-per-rank", options.job.cpus_per_rank,
                   "With --slurm: CPUs for each rank; the job asks distributed.nproc_per_node times this (default 1)")
      ->check(CLI::Range(1, 1024))
      ->group("Slurm");
  command
      ->add_option("--signal-lead", options.signal_lead_s,
                   "With --slurm: seconds before the time limit at which the job gets SIGTERM, checkpoints and\n"
                   "requeues itself (default 90; Slurm may send it up to a minute early)")
      ->check(CLI::Range(10, 86400))
      ->group("Slurm");
  command
      ->add_option("--sbatch", options.job.directives,
                   "With --slurm: one more #SBATCH line, e.g. --sbatch=--gres=gpu:2 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Slurm");
}

void run_on_slurm(RunSlurmOptions options, GlobalOptions& globals, OutputFormat format,
                  const std::function<run::SlurmSubmission(const run::SlurmSubmit&)>& submit) {
  const bool team = !store_is_file(globals);
  if (team) {
    // The run is recorded in this node's store (--local-db, on storage the job's nodes share), and
    // the job ships it to the server as `expctl run` does; the server reaches the job in sbatch's
    // environment, never in its script.
    options.job.global_options = {"--local-db", fs::absolute(globals.local_db).string()};
    options.job.team_server = globals.db_path;
  } else {
    options.job.global_options = {"--db", fs::absolute(globals.db_path).string()};
  }
  if (!globals.runs_dir.empty()) {
    options.job.global_options.insert(options.job.global_options.end(),
                                      {"--runs-dir", fs::absolute(globals.runs_dir).string()});
  }
  options.job.signal_lead = std::chrono::seconds(options.signal_lead_s);
  const run::SlurmSubmission submission = submit(options.job);
  ship_now(globals);  // with a team server: the queued run on the team's list now, not when the job starts
  if (format == OutputFormat::json && !options.wait) {
    print_json(json_envelope("slurm_submission", {{"run_id", submission.run.id},
                                                  {"job", submission.job},
                                                  {"status", store::to_string(submission.run.status)},
                                                  {"script", submission.script.string()},
                                                  {"output", submission.output.string()}}));
    return;
  }
  if (!globals.quiet) {
    std::cerr << fmt::format("run {} queued as Slurm job {} (script {}, output {})\n", submission.run.id,
                             submission.job, submission.script.string(), submission.output.string());
  }
  if (!options.wait) {
    std::cout << submission.run.id << '\n';
    if (!globals.quiet) {
      std::cerr << fmt::format("follow it: expctl watch {} (or --wait); stop it: expctl cancel {}\n", submission.run.id,
                               submission.run.id);
    }
    return;
  }
  TerminalObserver observer(globals.quiet, format);
  util::InterruptSignals signals;  // Ctrl-C stops the following, not the job
  const auto result = run::follow_slurm_run(store_opener(globals), submission, observer,
                                            [&signals] { return !signals.take().empty(); });
  if (result.run) {
    observer.result(result);
  }
  globals.result = result.exit_code;
}

namespace {

// Whether this host has a Slurm configuration for scontrol to read. Without one (a laptop reading
// the team store, slurm-client installed) scontrol looks for a configless controller and fails
// only after seconds; a read command asks nothing then.
bool slurm_configured() {
  std::error_code ignored;
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr && *conf != '\0') {
    return fs::exists(conf, ignored);
  }
  return fs::exists("/etc/slurm/slurm.conf", ignored) || fs::exists("/run/slurm/conf/slurm.conf", ignored);
}

}  // namespace

std::vector<EndedSlurmJob> ended_slurm_jobs(const std::vector<store::RunRecord>& runs) {
  constexpr std::size_t k_most_jobs_asked = 10;
  std::vector<EndedSlurmJob> waiting;  // the runs a job holds that read queued or running
  for (const store::RunRecord& run : runs) {
    if (run.status == store::RunStatus::queued || run.status == store::RunStatus::running) {
      if (auto job = run::slurm_job_of(run)) {
        waiting.push_back({run.id, run.status, std::move(*job), ""});
      }
    }
  }
  if (waiting.empty() || !slurm_configured()) {
    return {};
  }
  std::vector<EndedSlurmJob> ended;
  std::map<std::string, std::optional<std::string>> states;  // job -> final state ("": unknown to Slurm)
  const launch::slurm::Client client({}, std::chrono::seconds(2));
  for (EndedSlurmJob& run : waiting) {
    if (!states.contains(run.job)) {
      if (states.size() == k_most_jobs_asked) {
        break;  // a list of a running sweep's many tasks stays one scontrol call from each of the newest
      }
      try {
        const auto info = client.query(run.job);
        states[run.job] = !info                                  ? std::optional<std::string>("")
                          : launch::slurm::is_final(info->state) ? std::optional(info->state_text)
                                                                 : std::nullopt;
      } catch (const util::Failure& error) {
        util::log::debug(fmt::format("slurm: job {} of run {} not asked: {}", run.job, run.run_id, error.what()));
        return {};  // the same Slurm answers no job better
      }
    }
    if (const auto& state = states[run.job]) {
      run.job_state = *state;
      ended.push_back(std::move(run));
    }
  }
  return ended;
}

std::string ended_slurm_job_text(const EndedSlurmJob& ended) {
  const std::string job_said =
      ended.job_state.empty()
          ? fmt::format("Slurm no longer knows its job {} (ended and purged)", ended.job)
          : fmt::format("its Slurm job {} has ended ({})", ended.job, util::terminal_safe(ended.job_state));
  if (ended.status == store::RunStatus::queued) {
    return fmt::format(
        "run {} reads queued, but {} without starting it: `expctl cancel {}` records it interrupted, "
        "then `expctl resume {} --slurm` submits it again",
        ended.run_id, job_said, ended.run_id, ended.run_id);
  }
  return fmt::format(
      "run {} reads running, but {} and its expctl recorded no stop (killed, or its node failed): "
      "`expctl cancel {}` records it interrupted, then `expctl resume {} --slurm` continues it from its "
      "last checkpoint",
      ended.run_id, job_said, ended.run_id, ended.run_id);
}

}  // namespace expctl::cli
