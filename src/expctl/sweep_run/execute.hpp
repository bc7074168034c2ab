#pragma once
/// A loaded sweep run to its points' results, in-process: the machine held against the base
/// spec's pinned stack (run::check_pinned_stack, the run engine's own recipe), the slots, the plan
/// against the store, the runner's options, the exit code and the JSON documents `expctl sweep`
/// prints. The CLI only parses and prints; the file itself is sweep::load_sweep_file's.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/sweep/array_progress.hpp"
#include "expctl/sweep/plan.hpp"
#include "expctl/sweep/sbatch.hpp"
#include "expctl/sweep/slots.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/sweep_run/runner.hpp"
#include "expctl/util/exit_code.hpp"

namespace expctl::sweep_run {

/// Where the points record: what --db, --local-db and -v say.
struct StoreLocation {
  std::string db_path;   ///< --db / EXPCTL_DB: a SQLite file or a server
  std::string local_db;  ///< --local-db: the node-local store points record into when db_path is a server
  bool db_is_file = true;
  int verbosity = 0;
};

/// What to run.
struct ExecuteOptions {
  size_t parallel = 1;
  bool force = false;
  size_t limit = 0;
  int point = -1;  ///< --point; negative: SLURM_ARRAY_TASK_ID, else every point
};

/// The point a task runs: --point, else SLURM_ARRAY_TASK_ID; nullopt: every point. A task id
/// that is not a number is a usage error.
std::optional<size_t> selected_point(int point);

/// The plan of one `expctl sweep` invocation.
struct Execution {
  std::vector<sweep::Slot> slots;
  sweep::Plan plan;
  std::filesystem::path log_dir;  ///< <db dir>/sweeps/<name>-<hash12>
  bool external = false;          ///< a task of srun / torchrun / mpirun: the points run as its ranks
  /// The points a submitted, unmerged Slurm array holds (array_points_now); those still its to
  /// make are planned as taken.
  std::vector<sweep::ArrayPoint> array;
};

/// Holds the machine against the pinned stack (util::EnvError, exit 3, when every point would be
/// refused), sizes the slots, asks the store what is done (`open_if_present`: nullopt when there
/// is no store yet) and plans the jobs.
Execution prepare(const sweep::Sweep& sweep, const ExecuteOptions& options, const StoreLocation& where,
                  const std::function<std::optional<store::Store>()>& open_if_present);

/// "sweep NAME (HASH): P point(s) × R = N runs; D done, J to run ... in S slot(s) [...]; logs in DIR".
std::string plan_line(const sweep::Sweep& sweep, const Execution& execution);

/// --dry-run: one line per job ("   3  abcdef012345  lr=0.1  (resume RUN)").
std::string dry_run_text(const sweep::Sweep& sweep, const Execution& execution);

/// The body of the "sweep-plan" document (the CLI adds the envelope).
nlohmann::json plan_document(const sweep::Sweep& sweep, const Execution& execution);

/// Runs the planned jobs as child `expctl run`s (warning first when OMP_NUM_THREADS would size
/// every slot's threads alike).
RunnerResult execute(const sweep::Sweep& sweep, const Execution& execution, const StoreLocation& where,
                     ProgressSink progress);

/// 130 interrupted, the stopping point's 2 or 3, 1 when a point failed, else 0.
util::ExitCode exit_code_of(const RunnerResult& result);

/// The body of the "sweep" document (the CLI adds the envelope).
nlohmann::json result_document(const sweep::Sweep& sweep, const Execution& execution, const RunnerResult& result);

/// The closing line ("sweep NAME: 3 of 4 started run(s) completed, ...", or "nothing to run").
std::string result_line(const sweep::Sweep& sweep, const Execution& execution, const RunnerResult& result,
                        const std::string& file);

/// The Slurm job-array script of `--print-sbatch` (sbatch.hpp): `options`' --array-limit and
/// --sbatch lines, task I running point I of `file` with this expctl into its own store beside
/// the store (beside the node-local one with a server), to merge into the store afterwards.
std::string sbatch_script(const sweep::Sweep& sweep, const std::string& file, const StoreLocation& where,
                          sweep::SbatchOptions options);

/// Where a Slurm array's tasks write their stores (task-<I>.db) and the arrays' records: beside
/// the store, or beside the node-local store when the store is a server (sweep::array_dir).
std::filesystem::path task_store_dir(const sweep::Sweep& sweep, const StoreLocation& where);

/// This expctl's own path (/proc/self/exe), which points and Slurm tasks run.
std::filesystem::path self_executable();

}  // namespace expctl::sweep_run
