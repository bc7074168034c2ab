// `expctl sweep FILE`: runs the points of a sweep that the store does not hold yet (each as a
// child `expctl run` in a slot of its own), `--report` shows the results across points, and
// `--print-sbatch` writes the Slurm job-array script. The file format and the rules:
// docs/sweeps.md; the logic lives in src/expctl/sweep/.

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/cli/support_sweep.hpp"
#include "expctl/launch/environment.hpp"
#include "expctl/launch/rank_identity.hpp"
#include "expctl/sweep/environment.hpp"
#include "expctl/sweep/plan.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/sweep/runner.hpp"
#include "expctl/sweep/sbatch.hpp"
#include "expctl/sweep/slots.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

#ifdef EXPCTL_WITH_TORCH_PROVIDER
#include "expctl/run/stack.hpp"
#endif

namespace expctl::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct SweepOptions {
  std::string file;
  size_t parallel = 1;
  bool force = false;
  size_t limit = 0;
  int point = -1;
  bool dry_run = false;
  std::string expect_hash;
  bool report = false;
  std::vector<std::string> metrics;
  std::string output;
  bool print_sbatch = false;
  size_t array_limit = 0;
  std::vector<std::string> sbatch;
  std::string format = "text";
};

// ---------------------------------------------------------------------------------------------
// Loading

sweep::Sweep load(const SweepOptions& options) {
  sweep::Sweep sweep = load_sweep_file(options.file);
  EXPCTL_CHECK(options.expect_hash.empty() || options.expect_hash == sweep.hash, util::UsageError,
               "{} changed since --expect-hash {} was written (its sweep hash is now {}): point indexes may name other "
               "points; write the script again with --print-sbatch",
               options.file, options.expect_hash.substr(0, 12), sweep.hash.substr(0, 12));
  return sweep;
}

std::optional<size_t> selected_point(const SweepOptions& options) {
  if (options.point >= 0) {
    return static_cast<size_t>(options.point);
  }
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (task == nullptr || *task == '\0') {
    return std::nullopt;
  }
  const std::string_view text(task);
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  EXPCTL_CHECK(error == std::errc() && end == text.data() + text.size(), util::UsageError,
               "SLURM_ARRAY_TASK_ID=\"{}\" is not a point index: unset it or pass --point I", text);
  return value;
}

// ---------------------------------------------------------------------------------------------
// --report and --print-sbatch

fs::path self_executable() {
  std::error_code error;
  const fs::path path = fs::read_symlink("/proc/self/exe", error);
  EXPCTL_CHECK(!error, util::LaunchError, "cannot find this expctl's own path (/proc/self/exe): {}", error.message());
  return path;
}

void print_sbatch(const sweep::Sweep& sweep, const SweepOptions& options, const GlobalOptions& globals) {
  const fs::path db(globals.db_path);
  sweep::SbatchOptions script;
  script.sweep_file = options.file;
  script.executable = self_executable().string();
  script.store_dir = (db.parent_path() / ("sweep-" + sweep.name)).string();
  script.merged_db = globals.db_path;
  script.max_concurrent = options.array_limit;
  script.directives = options.sbatch;
  write_output(options.output, sweep::render_sbatch(sweep, script));
}

// ---------------------------------------------------------------------------------------------
// Running

#ifdef EXPCTL_WITH_TORCH_PROVIDER

/// The fingerprint `expctl run` records, by the run engine's own recipe; the pins that do not
/// hold on this machine are collected on the way.
sweep::FingerprintFn run_fingerprint(std::vector<std::string>& drifted) {
  return [&drifted](const spec::Spec& spec) {
    const run::StackCheck check = run::check_pinned_stack(spec);
    for (const auto& row : check.drifted()) {
      drifted.push_back(row.key);
    }
    return check.fingerprint;
  };
}

/// Refuses before anything starts when the first point's pinned stack does not hold here (every
/// point would exit 3).
void check_pins(const sweep::Sweep& sweep, sweep::Fingerprints& fingerprints, const std::vector<std::string>& drifted) {
  fingerprints.of(sweep.points.front().spec);
  if (!drifted.empty()) {
    throw util::EnvError(fmt::format("this machine differs from the pinned stack of {} ({}): every point would be "
                                     "refused; `expctl verify {}` shows the table",
                                     sweep.base.string(), util::join(drifted, ", "), sweep.base.string()),
                         util::ExitCode::mismatch);
  }
}

#endif  // EXPCTL_WITH_TORCH_PROVIDER

struct Execution {
  std::vector<sweep::Slot> slots;
  sweep::Plan plan;
  fs::path log_dir;
  bool external = false;  ///< a task of srun / torchrun / mpirun: the points run as its ranks
};

std::vector<sweep::Slot> make_slots(const SweepOptions& options, int gpu_count) {
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto gpus = sweep::visible_gpus(devices != nullptr ? std::optional<std::string>(devices) : std::nullopt, gpu_count);
  return sweep::plan_slots(options.parallel, sweep::allowed_cpus(), gpus);
}

std::vector<sweep::PointState> point_states(const sweep::Sweep& sweep, const std::vector<sweep::Slot>& slots,
                                            sweep::Fingerprints& fingerprints, const store::Store& db) {
  std::vector<sweep::PointState> states;
  for (const sweep::Point& point : sweep.points) {
    const auto runs = db.list_runs({.spec_hash_prefix = point.spec.hash()});
    states.push_back(sweep::point_state(runs, sweep::accepted_environments(fingerprints.of(point.spec), slots),
                                        sweep::hash_tag(sweep)));
  }
  return states;
}

sweep::PlanOptions plan_options(const SweepOptions& options, bool external) {
  return {options.force || external, options.limit, selected_point(options)};
}

fs::path log_dir_of(const sweep::Sweep& sweep, const GlobalOptions& globals) {
  // Beside the store; with a server as --db, beside the node-local store the points record into.
  return fs::absolute(store_is_file(globals) ? globals.db_path : globals.local_db).parent_path() / "sweeps" /
         fmt::format("{}-{}", sweep.name, sweep.hash.substr(0, 12));
}

Execution prepare(const sweep::Sweep& sweep, const SweepOptions& options, const GlobalOptions& globals,
                  sweep::Fingerprints& fingerprints) {
  Execution execution;
  execution.external = launch::detect_launcher(launch::current_environment()).has_value();
  EXPCTL_CHECK(!execution.external || selected_point(options), util::UsageError,
               "expctl sweep runs under a launcher (srun, torchrun, mpirun) only for one point: pass --point I "
               "(an --print-sbatch script does)");
  execution.slots = execution.external ? std::vector<sweep::Slot>{sweep::Slot{}}
                                       : make_slots(options, sweep::gpu_count(fingerprints.of(sweep.points.front().spec)));
  // No store yet: nothing is done (and a dry run creates none).
  std::vector<sweep::PointState> states(sweep.points.size());
  if (!options.force && !execution.external) {
    if (const auto db = open_store_if_present(globals)) {
      states = point_states(sweep, execution.slots, fingerprints, *db);
    }
  }
  execution.plan = sweep::plan_jobs(sweep, states, plan_options(options, execution.external));
  execution.log_dir = log_dir_of(sweep, globals);
  return execution;
}

std::string slots_text(const std::vector<sweep::Slot>& slots) {
  std::vector<std::string> parts;
  for (const sweep::Slot& slot : slots) {
    parts.push_back(slot.cpus.empty() ? "inherited" : "cpus " + sweep::cpu_list_text(slot.cpus));
    if (!slot.gpus.empty()) {
      parts.back() += " gpus " + util::join(slot.gpus, ",");
    }
  }
  return util::join(parts, " | ");
}

void print_plan_line(const sweep::Sweep& sweep, const Execution& execution) {
  const sweep::Plan& plan = execution.plan;
  std::string line = fmt::format("sweep {} ({}): {} point(s) × {} = {} runs; {} done, {} to run", sweep.name,
                                 sweep.hash.substr(0, 12), plan.points.size(), sweep.repeat, plan.total_runs,
                                 plan.done_runs, plan.jobs.size());
  if (plan.resumed > 0) {
    line += fmt::format(" ({} resumed)", plan.resumed);
  }
  if (plan.left_out > 0) {
    line += fmt::format(", {} left for later (--limit)", plan.left_out);
  }
  std::cerr << line << fmt::format(" in {} slot(s) [{}]; logs in {}\n", execution.slots.size(),
                                   slots_text(execution.slots), execution.log_dir.string());
}

json plan_json(const sweep::Sweep& sweep, const Execution& execution) {
  json jobs = json::array();
  for (const sweep::Job& job : execution.plan.jobs) {
    const sweep::Point& point = sweep.points[job.point];
    jobs.push_back({{"point", job.point}, {"hash", point.spec.hash()}, {"label", sweep::point_label(point)},
                    {"resume_run", job.resume_run.empty() ? json(nullptr) : json(job.resume_run)}});
  }
  json document = json_envelope("sweep-plan");
  document["sweep"] = {{"name", sweep.name}, {"hash", sweep.hash}, {"file", sweep.file.string()}};
  document["points"] = execution.plan.points;
  document["total_runs"] = execution.plan.total_runs;
  document["done_runs"] = execution.plan.done_runs;
  document["left_out"] = execution.plan.left_out;
  document["jobs"] = std::move(jobs);
  return document;
}

void print_dry_run(const sweep::Sweep& sweep, const Execution& execution, const SweepOptions& options) {
  if (options.format == "json") {
    print_json(plan_json(sweep, execution));
    return;
  }
  for (const sweep::Job& job : execution.plan.jobs) {
    const sweep::Point& point = sweep.points[job.point];
    std::cout << fmt::format("{:>4}  {}  {}{}\n", job.point, point.spec.hash().substr(0, 12), sweep::point_label(point),
                             job.resume_run.empty() ? "" : "  (resume " + job.resume_run + ")");
  }
}

// One progress line on a terminal (redrawn in place, events printed above it); elsewhere the
// events and a progress line whenever the counts change.
sweep::ProgressSink progress_sink(const GlobalOptions& globals) {
  if (globals.quiet) {
    return {};
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto last = std::make_shared<std::string>();
  return [tty, last](const std::string& line, bool redraw) {
    if (tty) {
      std::cerr << "\r\033[K" << line << (redraw ? "" : "\n") << std::flush;
      if (!redraw && !last->empty()) {
        std::cerr << *last << std::flush;
      }
      if (redraw) {
        *last = line;
      }
      return;
    }
    const std::string counts = line.substr(0, line.find(", elapsed"));
    if (!redraw || counts != *last) {
      std::cerr << line << '\n';
    }
    if (redraw) {
      *last = counts;
    }
  };
}

std::vector<std::string> global_args(const GlobalOptions& globals) {
  // A server's location goes to the points through the environment (EXPCTL_DB), not argv: ps
  // shows argv, and a URL may carry a password.
  std::vector<std::string> args;
  if (store_is_file(globals)) {
    args = {"--db", fs::absolute(globals.db_path).string()};
  } else {
    args = {"--local-db", fs::absolute(globals.local_db).string()};
  }
  for (int i = 0; i < globals.verbosity; ++i) {
    args.emplace_back("-v");
  }
  return args;
}

void warn_about_threads(const Execution& execution) {
  if (execution.slots.size() > 1 && std::getenv("OMP_NUM_THREADS") != nullptr) {
    util::log::warn(fmt::format("OMP_NUM_THREADS={} is set, so every point's ranks use that many threads whatever "
                                "their slot's cores; unset it to size threads by the slot",
                                std::getenv("OMP_NUM_THREADS")));
  }
}

sweep::RunnerOptions runner_options(const Execution& execution, const GlobalOptions& globals) {
  sweep::RunnerOptions runner;
  runner.executable = self_executable();
  runner.global_args = global_args(globals);
  runner.slots = execution.slots;
  runner.environment = launch::current_environment();
  runner.environment.erase("EXPCTL_DB");  // --db names a file; a server goes through the environment
  if (!store_is_file(globals)) {
    runner.environment["EXPCTL_DB"] = globals.db_path;
  }
  runner.log_dir = execution.log_dir;
  runner.done_before = execution.plan.done_runs;
  runner.total_runs = execution.plan.total_runs;
  runner.progress = progress_sink(globals);
  return runner;
}

util::ExitCode exit_code_of(const sweep::RunnerResult& result) {
  if (result.interrupted) {
    return util::ExitCode::interrupted;
  }
  if (result.stopped_by_exit != 0) {
    return static_cast<util::ExitCode>(result.stopped_by_exit);
  }
  const bool failed = std::any_of(result.outcomes.begin(), result.outcomes.end(),
                                  [](const sweep::JobOutcome& outcome) { return outcome.exit_code != 0; });
  return failed ? util::ExitCode::run_failed : util::ExitCode::ok;
}

json result_json(const sweep::Sweep& sweep, const Execution& execution, const sweep::RunnerResult& result) {
  json jobs = json::array();
  for (const sweep::JobOutcome& outcome : result.outcomes) {
    jobs.push_back({{"point", outcome.job.point},
                    {"resumed", !outcome.job.resume_run.empty()},
                    {"run_id", outcome.run_id.empty() ? json(nullptr) : json(outcome.run_id)},
                    {"exit_code", outcome.exit_code},
                    {"seconds", outcome.seconds},
                    {"slot", outcome.slot},
                    {"log", outcome.log.string()}});
  }
  json document = json_envelope("sweep");
  document["sweep"] = {{"name", sweep.name}, {"hash", sweep.hash}, {"file", sweep.file.string()}};
  document["total_runs"] = execution.plan.total_runs;
  document["done_before"] = execution.plan.done_runs;
  document["jobs"] = std::move(jobs);
  document["not_started"] = result.not_started + execution.plan.left_out;
  document["interrupted"] = result.interrupted;
  return document;
}

void print_result(const sweep::Sweep& sweep, const SweepOptions& options, const Execution& execution,
                  const sweep::RunnerResult& result, const GlobalOptions& globals) {
  if (options.format == "json") {
    print_json(result_json(sweep, execution, result));
    return;
  }
  const auto completed = static_cast<size_t>(std::count_if(result.outcomes.begin(), result.outcomes.end(),
                                                           [](const auto& outcome) { return outcome.exit_code == 0; }));
  if (!globals.quiet && execution.plan.jobs.empty()) {
    std::cerr << fmt::format("sweep {}: nothing to run: all {} runs are done (--report shows the results, --force runs "
                             "them again)\n",
                             sweep.name, execution.plan.total_runs);
  } else if (!globals.quiet) {
    std::cerr << fmt::format("sweep {}: {} of {} started run(s) completed, {} not started; {}/{} runs done. Results: "
                             "expctl sweep {} --report\n",
                             sweep.name, completed, result.outcomes.size(), result.not_started + execution.plan.left_out,
                             execution.plan.done_runs + completed, execution.plan.total_runs, options.file);
  }
}

void run_points(const sweep::Sweep& sweep, const SweepOptions& options, GlobalOptions& globals) {
#ifdef EXPCTL_WITH_TORCH_PROVIDER
  std::vector<std::string> drifted;
  sweep::Fingerprints fingerprints(run_fingerprint(drifted));
  check_pins(sweep, fingerprints, drifted);
  const Execution execution = prepare(sweep, options, globals, fingerprints);
  if (!globals.quiet) {
    print_plan_line(sweep, execution);
  }
  if (options.dry_run) {
    print_dry_run(sweep, execution, options);
    return;
  }
  warn_about_threads(execution);
  const sweep::RunnerResult result = sweep::run_jobs(sweep, execution.plan.jobs, runner_options(execution, globals));
  print_result(sweep, options, execution, result, globals);
  globals.result = exit_code_of(result);
#else
  (void)sweep;
  (void)options;
  (void)globals;
  throw util::UsageError(
      "this expctl was built without training (EXPCTL_WITH_TORCH=OFF): it can print --report and --print-sbatch, "
      "but not run points");
#endif
}

void run_sweep(const SweepOptions& options, GlobalOptions& globals) {
  EXPCTL_CHECK(options.report || (options.format != "markdown" && options.format != "html"), util::UsageError,
               "--format {} is for --report: running a sweep prints text or json", options.format);
  const sweep::Sweep sweep = load(options);
  if (options.print_sbatch) {
    print_sbatch(sweep, options, globals);
  } else if (options.report) {
    write_sweep_report(globals, sweep, options.metrics, options.format, options.output);
  } else {
    run_points(sweep, options, globals);
  }
}

// ---------------------------------------------------------------------------------------------
// Options

void add_run_options(CLI::App* command, SweepOptions& options) {
  command->add_option("--parallel", options.parallel,
                      "Run N points at once, each in its own slot: the cores this process may use are split\n"
                      "into N disjoint sets (CPU affinity; the ranks' threads follow it), and on a GPU machine\n"
                      "the GPUs too (CUDA_VISIBLE_DEVICES per slot). Default 1")
      ->check(CLI::Range(1, 1024));
  command->add_flag("--force", options.force, "Run every point again, whatever the store holds");
  command->add_option("--limit", options.limit, "Start at most N runs now; run the sweep again for the rest")
      ->check(CLI::Range(1, 1000000));
  command->add_option("--point", options.point,
                      "Run only point I (0-based, as `expctl validate FILE` lists them); default: the\n"
                      "SLURM_ARRAY_TASK_ID of a Slurm array task, else every point")
      ->check(CLI::Range(0, 1000000));
  command->add_flag("--dry-run", options.dry_run, "Print what would run (and what would be resumed), start nothing");
  command->add_option("--expect-hash", options.expect_hash,
                      "Refuse unless the sweep's hash is this one (the --print-sbatch script passes it, so an\n"
                      "edited sweep file cannot shift which point a task runs)");
}

void add_report_options(CLI::App* command, SweepOptions& options) {
  command->add_flag("--report", options.report,
                    "Print the results instead of running: one row per configuration (replicates over seeds\n"
                    "together, median ± run-to-run spread), the axes as columns, the best per metric")
      ->group("Results");
  command->add_option("--metric", options.metrics,
                      "A summary metric for --report (repeatable; default: final_train_loss, eval_loss,\n"
                      "eval_accuracy, samples_per_sec)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Results");
  command->add_option("-o,--output", options.output, "Write the --report or --print-sbatch output to this file")
      ->group("Results");
}

void add_slurm_options(CLI::App* command, SweepOptions& options) {
  command->add_flag("--print-sbatch", options.print_sbatch,
                    "Print a Slurm job-array script (--array=0-N%K): task I runs point I with its own store\n"
                    "beside --db, to bring together afterwards with expctl merge")
      ->group("Slurm");
  command->add_option("--array-limit", options.array_limit, "The K of --array=0-N%K: tasks at once (default: all)")
      ->check(CLI::Range(1, 100000))
      ->group("Slurm");
  command->add_option("--sbatch", options.sbatch,
                      "One more #SBATCH line for --print-sbatch, e.g. --sbatch=--partition=gpu (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Slurm");
}

void setup_sweep(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* command = app.add_subcommand(
      "sweep",
      "Run a sweep: every point of FILE (a base spec and axes: grid, zip, seeds, repeat; see\n"
      "docs/sweeps.md) that the store does not hold yet. A point is done when a completed run of its\n"
      "spec hash exists for this machine's environment hash, so a sweep is resumable: after Ctrl-C\n"
      "or a crash, run it again; its interrupted, lost and failed runs are resumed (expctl resume,\n"
      "same run id), the rest start anew. Each point runs as a child `expctl run`, tagged\n"
      "sweep:<name>, sweep-hash:<hash> and sweep-point:<I>; its output goes to a log under\n"
      "<db dir>/sweeps/. One progress line on stderr: runs done/total and an ETA.\n"
      "Examples:\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --parallel 2\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --report --format html -o sweep.html\n"
      "  expctl sweep experiments/sweep-quickstart.yaml --print-sbatch --array-limit 4 > sweep.sbatch");
  command->add_option("file", options->file, "Sweep file (YAML)")->required();
  add_run_options(command, *options);
  add_report_options(command, *options);
  add_slurm_options(command, *options);
  add_format_option(command, options->format, {"text", "json", "markdown", "html"});
  command->callback([options, globals] { run_sweep(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(sweep, 22, setup_sweep);

}  // namespace expctl::cli
