#include "expctl/sweep_run/execute.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "expctl/launch/environment.hpp"
#include "expctl/run/stack.hpp"
#include "expctl/sweep/environment.hpp"
#include "expctl/sweep_run/slurm_array.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep_run {

using sweep::FingerprintFn;
using sweep::Fingerprints;
using sweep::Job;
using sweep::Plan;
using sweep::Point;
using sweep::PointState;
using sweep::SbatchOptions;
using sweep::Slot;
using sweep::Sweep;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// The fingerprint `expctl run` records, by the run engine's own recipe; the pins that do not
/// hold on this machine are collected on the way.
FingerprintFn run_fingerprint(std::vector<std::string>& drifted) {
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
void check_pins(const Sweep& sweep, Fingerprints& fingerprints, const std::vector<std::string>& drifted) {
  fingerprints.of(sweep.points.front().spec);
  if (!drifted.empty()) {
    throw util::EnvError(fmt::format("this machine differs from the pinned stack of {} ({}): every point would be "
                                     "refused; `expctl verify {}` shows the table",
                                     sweep.base.string(), util::join(drifted, ", "), sweep.base.string()),
                         util::ExitCode::mismatch);
  }
}

std::vector<Slot> make_slots(const ExecuteOptions& options, int gpu_count) {
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto gpus =
      sweep::visible_gpus(devices != nullptr ? std::optional<std::string>(devices) : std::nullopt, gpu_count);
  return sweep::plan_slots(options.parallel, sweep::allowed_cpus(), gpus);
}

std::vector<PointState> point_states(const Sweep& sweep, const std::vector<Slot>& slots, Fingerprints& fingerprints,
                                     const store::Store& db) {
  std::vector<PointState> states;
  for (const Point& point : sweep.points) {
    const auto runs = db.list_runs({.spec_hash_prefix = point.spec.hash()});
    states.push_back(
        sweep::point_state(runs, accepted_environments(fingerprints.of(point.spec), slots), hash_tag(sweep)));
  }
  return states;
}

fs::path log_dir_of(const Sweep& sweep, const StoreLocation& where) {
  // Beside the store; with a server as --db, beside the node-local store the points record into.
  return fs::absolute(where.db_is_file ? where.db_path : where.local_db).parent_path() / "sweeps" /
         fmt::format("{}-{}", sweep.name, sweep.hash.substr(0, 12));
}

std::string slots_text(const std::vector<Slot>& slots) {
  std::vector<std::string> parts;
  for (const Slot& slot : slots) {
    parts.push_back(slot.cpus.empty() ? "inherited" : "cpus " + sweep::cpu_list_text(slot.cpus));
    if (!slot.gpus.empty()) {
      parts.back() += " gpus " + util::join(slot.gpus, ",");
    }
  }
  return util::join(parts, " | ");
}

std::vector<std::string> global_args(const StoreLocation& where) {
  // A server's location goes to the points through the environment (EXPCTL_DB), not argv: ps
  // shows argv, and a URL may carry a password.
  std::vector<std::string> args;
  if (where.db_is_file) {
    args = {"--db", fs::absolute(where.db_path).string()};
  } else {
    args = {"--local-db", fs::absolute(where.local_db).string()};
  }
  for (int i = 0; i < where.verbosity; ++i) {
    args.emplace_back("-v");
  }
  return args;
}

void warn_about_threads(const Execution& execution) {
  if (execution.slots.size() > 1 && std::getenv("OMP_NUM_THREADS") != nullptr) {
    util::log::warn(
        fmt::format("OMP_NUM_THREADS={} is set, so every point's ranks use that many threads whatever "
                    "their slot's cores; unset it to size threads by the slot",
                    std::getenv("OMP_NUM_THREADS")));
  }
}

RunnerOptions runner_options(const Execution& execution, const StoreLocation& where, ProgressSink progress) {
  RunnerOptions runner;
  runner.executable = self_executable();
  runner.global_args = global_args(where);
  runner.slots = execution.slots;
  runner.environment = launch::current_environment();
  runner.environment.erase("EXPCTL_DB");  // --db names a file; a server goes through the environment
  if (!where.db_is_file) {
    runner.environment["EXPCTL_DB"] = where.db_path;
  }
  runner.log_dir = execution.log_dir;
  runner.done_before = execution.plan.done_runs;
  runner.total_runs = execution.plan.total_runs;
  runner.progress = std::move(progress);
  return runner;
}

json sweep_json(const Sweep& sweep) {
  return {{"name", sweep.name}, {"hash", sweep.hash}, {"file", sweep.file.string()}};
}

}  // namespace

std::optional<size_t> selected_point(int point) {
  if (point >= 0) {
    return static_cast<size_t>(point);
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

Execution prepare(const Sweep& sweep, const ExecuteOptions& options, const StoreLocation& where,
                  const std::function<std::optional<store::Store>()>& open_if_present) {
#ifndef EXPCTL_WITH_TORCH_PROVIDER
  throw util::UsageError(
      "this expctl was built without training (EXPCTL_WITH_TORCH=OFF): it can print --report and --print-sbatch, "
      "but not run points");
#endif
  std::vector<std::string> drifted;
  Fingerprints fingerprints(run_fingerprint(drifted));
  check_pins(sweep, fingerprints, drifted);
  Execution execution;
  execution.external = launch::detect_launcher(launch::current_environment()).has_value();
  const std::optional<size_t> point = selected_point(options.point);
  EXPCTL_CHECK(!execution.external || point, util::UsageError,
               "expctl sweep runs under a launcher (srun, torchrun, mpirun) only for one point: pass --point I "
               "(an --print-sbatch script does)");
  execution.slots = execution.external
                        ? std::vector<Slot>{Slot{}}
                        : make_slots(options, sweep::gpu_count(fingerprints.of(sweep.points.front().spec)));
  // No store yet: nothing is done (and a dry run creates none).
  std::vector<PointState> states(sweep.points.size());
  if (!options.force && !execution.external) {
    if (const auto db = open_if_present()) {
      states = point_states(sweep, execution.slots, fingerprints, *db);
    }
    execution.array = array_points_now(sweep, task_store_dir(sweep, where));
    for (const sweep::ArrayPoint& held : execution.array) {
      states[held.point].in_array = sweep::held_by_array(held);
    }
  }
  execution.plan = plan_jobs(sweep, states, {options.force || execution.external, options.limit, point});
  execution.log_dir = log_dir_of(sweep, where);
  return execution;
}

std::string plan_line(const Sweep& sweep, const Execution& execution) {
  const Plan& plan = execution.plan;
  std::string line =
      fmt::format("sweep {} ({}): {} point(s) × {} = {} runs; {} done, {} to run", sweep.name, sweep.hash.substr(0, 12),
                  plan.points.size(), sweep.repeat, plan.total_runs, plan.done_runs - plan.in_array, plan.jobs.size());
  if (plan.resumed > 0) {
    line += fmt::format(" ({} resumed)", plan.resumed);
  }
  if (plan.in_array > 0) {
    line += fmt::format(", {} held by a submitted Slurm array", plan.in_array);
  }
  if (plan.left_out > 0) {
    line += fmt::format(", {} left for later (--limit)", plan.left_out);
  }
  return line + fmt::format(" in {} slot(s) [{}]; logs in {}\n", execution.slots.size(), slots_text(execution.slots),
                            execution.log_dir.string());
}

std::string dry_run_text(const Sweep& sweep, const Execution& execution) {
  std::string text;
  for (const Job& job : execution.plan.jobs) {
    const Point& point = sweep.points[job.point];
    text += fmt::format("{:>4}  {}  {}{}\n", job.point, point.spec.hash().substr(0, 12), point_label(point),
                        job.resume_run.empty() ? "" : "  (resume " + job.resume_run + ")");
  }
  for (const std::string& line : sweep::array_lines(execution.array)) {
    text += line + "\n";
  }
  return text;
}

json plan_document(const Sweep& sweep, const Execution& execution) {
  json jobs = json::array();
  for (const Job& job : execution.plan.jobs) {
    const Point& point = sweep.points[job.point];
    jobs.push_back({{"point", job.point},
                    {"hash", point.spec.hash()},
                    {"label", point_label(point)},
                    {"resume_run", job.resume_run.empty() ? json(nullptr) : json(job.resume_run)}});
  }
  json document = json::object();
  document["sweep"] = sweep_json(sweep);
  document["points"] = execution.plan.points;
  document["total_runs"] = execution.plan.total_runs;
  document["done_runs"] = execution.plan.done_runs;
  document["left_out"] = execution.plan.left_out;
  document["in_array_runs"] = execution.plan.in_array;
  document["jobs"] = std::move(jobs);
  document["array"] = sweep::array_json(execution.array);
  return document;
}

RunnerResult execute(const Sweep& sweep, const Execution& execution, const StoreLocation& where,
                     ProgressSink progress) {
  warn_about_threads(execution);
  return run_jobs(sweep, execution.plan.jobs, runner_options(execution, where, std::move(progress)));
}

util::ExitCode exit_code_of(const RunnerResult& result) {
  if (result.interrupted) {
    return util::ExitCode::interrupted;
  }
  if (result.stopped_by_exit != 0) {
    return static_cast<util::ExitCode>(result.stopped_by_exit);
  }
  const bool failed = std::any_of(result.outcomes.begin(), result.outcomes.end(),
                                  [](const JobOutcome& outcome) { return outcome.exit_code != 0; });
  return failed ? util::ExitCode::run_failed : util::ExitCode::ok;
}

json result_document(const Sweep& sweep, const Execution& execution, const RunnerResult& result) {
  json jobs = json::array();
  for (const JobOutcome& outcome : result.outcomes) {
    jobs.push_back({{"point", outcome.job.point},
                    {"resumed", !outcome.job.resume_run.empty()},
                    {"run_id", outcome.run_id.empty() ? json(nullptr) : json(outcome.run_id)},
                    {"exit_code", outcome.exit_code},
                    {"seconds", outcome.seconds},
                    {"slot", outcome.slot},
                    {"log", outcome.log.string()}});
  }
  json document = json::object();
  document["sweep"] = sweep_json(sweep);
  document["total_runs"] = execution.plan.total_runs;
  document["done_before"] = execution.plan.done_runs;
  document["jobs"] = std::move(jobs);
  document["not_started"] = result.not_started + execution.plan.left_out;
  document["interrupted"] = result.interrupted;
  return document;
}

std::string result_line(const Sweep& sweep, const Execution& execution, const RunnerResult& result,
                        const std::string& file) {
  if (execution.plan.jobs.empty()) {
    return fmt::format(
        "sweep {}: nothing to run: all {} runs are done (--report shows the results, --force runs "
        "them again)\n",
        sweep.name, execution.plan.total_runs);
  }
  const auto completed = static_cast<size_t>(std::count_if(result.outcomes.begin(), result.outcomes.end(),
                                                           [](const auto& outcome) { return outcome.exit_code == 0; }));
  return fmt::format(
      "sweep {}: {} of {} started run(s) completed, {} not started; {}/{} runs done. Results: "
      "expctl sweep {} --report\n",
      sweep.name, completed, result.outcomes.size(), result.not_started + execution.plan.left_out,
      execution.plan.done_runs + completed, execution.plan.total_runs, file);
}

std::string sbatch_script(const Sweep& sweep, const std::string& file, const StoreLocation& where,
                          SbatchOptions options) {
  options.sweep_file = file;
  options.executable = self_executable().string();
  // With a server as --db, the tasks' stores go beside the node-local store and the merge hint
  // names the server through the environment: its connection string (which may hold a password)
  // is never written into the script.
  options.store_dir = task_store_dir(sweep, where).string();
  options.merged_db = where.db_is_file ? where.db_path : "\"$EXPCTL_DB\"";
  return render_sbatch(sweep, options);
}

fs::path task_store_dir(const Sweep& sweep, const StoreLocation& where) {
  return sweep::array_dir(sweep, where.db_is_file ? where.db_path : where.local_db);
}

fs::path self_executable() {
  std::error_code error;
  const fs::path path = fs::read_symlink("/proc/self/exe", error);
  EXPCTL_CHECK(!error, util::LaunchError, "cannot find this expctl's own path (/proc/self/exe): {}", error.message());
  return path;
}

}  // namespace expctl::sweep_run
