#pragma once
/// Running a user's program (the spec's `program:` section, docs/program.md) on this node's ranks:
/// the same plan, supervisor, recorder and verdicts as the built-in trainer; only the command, its
/// environment and the source of the step records (ProgramRecords) differ.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/run/observer.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/util/sandbox.hpp"

namespace expctl::run {

/// Variables a program's rank gets from expctl (on top of torchrun's), which program.env cannot set.
inline constexpr std::string_view k_program_variables[] = {
    "EXPCTL_SEED",          "EXPCTL_RUN_ID",   "EXPCTL_CHECKPOINT_DIR", "EXPCTL_PARAMS_FILE",
    "EXPCTL_METRICS_FD",    "EXPCTL_RESUME",   "EXPCTL_CONTROL_FD",     "PYTHONHASHSEED",
    "TORCHELASTIC_RUN_ID",  "RANK",            "LOCAL_RANK",            "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",     "GROUP_RANK",      "MASTER_ADDR",           "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
};

/// Who hosts the rendezvous store the program's ranks meet in (torch's env:// rendezvous).
enum class StoreHost {
  rank0,     ///< the program's rank 0, as under torchrun without its agent (one node, started by expctl)
  expctl,    ///< node 0's / rank 0's `expctl run` (several nodes, mpirun, srun, Kubeflow): ranks join as clients
  launcher,  ///< torchrun's agent already does, and its variables are passed on as they are
};

/// Where one supervisor's program ranks run and what they are told.
struct ProgramLaunch {
  std::string run_id;
  std::filesystem::path run_dir;         ///< program/ (parameters, the Python module) is written here
  std::filesystem::path checkpoint_dir;  ///< EXPCTL_CHECKPOINT_DIR
  bool resume = false;                   ///< EXPCTL_RESUME=1
  StoreHost store = StoreHost::rank0;
};

/// Where rank `rank` of a program with `program.sandbox: true` may write (docs/program.md#the-sandbox):
/// the run's folder, its checkpoint folder, the shared-memory folder, program.writable (relative to
/// the spec's directory) and, last, its private temporary folder (<run>/tmp/rank-N, its $TMPDIR).
/// nullopt: not sandboxed (program.sandbox false, --sandbox=off, or no Landlock here).
std::optional<util::sandbox::Writable> program_sandbox(const nlohmann::json& values,
                                                       const std::filesystem::path& spec_file,
                                                       const ProgramLaunch& where, int rank);

/// The directory the ranks start in: program.workdir relative to the spec's directory (default:
/// the spec's directory).
std::filesystem::path program_workdir(const nlohmann::json& values, const std::filesystem::path& spec_file);

/// Refuses (util::UsageError, exit 2) before anything is recorded or started: a workdir that is
/// not a directory, a program.env that sets one of k_program_variables, a command whose
/// program is not found or not executable.
void check_program_launchable(const nlohmann::json& values, const std::filesystem::path& spec_file);

/// Writes the program files (the parameters as JSON, the `expctl` Python module) under
/// `where.run_dir`/program and returns one RankSpec per planned rank: the substituted command in
/// the workdir, torchrun's environment (the store hosted as `where.store` says) plus expctl's
/// variables.
std::vector<launch::RankSpec> program_rank_specs(const launch::LaunchPlan& plan, const nlohmann::json& values,
                                                 const std::filesystem::path& spec_file, const ProgramLaunch& where);

/// The Python module `expctl` (stdlib only) that program ranks find on their PYTHONPATH.
std::string_view python_module_source();

/// Turns the lines of program ranks (program_protocol.hpp) into step records for the recorder:
/// step times from consecutive timestamps of one rank, samples_per_sec from `samples`. A line
/// that is not the protocol is skipped with a warning naming the rank (the first few per rank;
/// all are counted). Called on the supervisor's thread.
class ProgramRecords {
 public:
  /// `recorder` null: nothing is stored here (an external launcher's rank other than 0, whose
  /// records go to rank 0); `keep`: the points are also kept for handing over (points()).
  ProgramRecords(Recorder* recorder, RunObserver& observer, bool keep = false)
      : m_recorder(recorder), m_observer(observer), m_keep(keep) {}

  void on_line(int rank, std::string_view line);
  /// The lines so far were an earlier invocation's (a resume's replay, journal.hpp): the next
  /// line of a rank times no step from them.
  void forget_times() { m_last_time.clear(); }

  /// Lines stored as steps, and lines skipped, over every rank.
  std::int64_t steps_logged() const { return m_steps; }
  std::int64_t lines_skipped() const { return m_skipped; }
  /// Every point of every logged step, when kept.
  const std::vector<store::MetricPoint>& points() const { return m_points; }
  /// The local modules' files the ranks reported importing (`modules` lines), over every rank.
  const std::set<std::string>& modules() const { return m_modules; }

 private:
  Recorder* m_recorder;
  RunObserver& m_observer;
  std::map<int, double> m_last_time;  // rank -> time of its previous step line
  std::map<int, int> m_warnings;      // rank -> warnings printed
  std::int64_t m_steps = 0;
  std::int64_t m_skipped = 0;
  bool m_keep = false;
  std::vector<store::MetricPoint> m_points;
  std::set<std::string> m_modules;
};

/// The files of `modules` (absolute paths a program's ranks reported importing) that neither a
/// program.files pattern nor a program.inputs entry of the run's spec (`values`, with relative
/// names from `spec_file`'s folder) covers: their content is not in the spec hash. Relative to the
/// spec's folder where they lie under it; sorted.
std::vector<std::string> unhashed_modules(const std::set<std::string>& modules, const nlohmann::json& values,
                                          const std::filesystem::path& spec_file);

/// The metric points of one logged step of `rank` (pure; ProgramRecords' arithmetic):
/// `previous_time`: that rank's previous step's time, if any.
std::vector<store::MetricPoint> logged_step_points(int rank, std::int64_t step,
                                                   const std::vector<std::pair<std::string, double>>& values,
                                                   std::optional<double> time, std::optional<double> previous_time);

}  // namespace expctl::run
