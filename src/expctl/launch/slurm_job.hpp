#pragma once
/// A Slurm job as expctl sees it from outside: submitted with `sbatch --parsable`, followed with
/// `scontrol show job -o` (one line of Key=Value pairs; without slurmdbd there is no sacct),
/// cancelled or requeued with scancel/scontrol. Only machine formats are parsed, never the human
/// tables, and a field this expctl does not know is ignored, so a newer Slurm that adds fields or
/// job states still parses (an unknown state reads `unknown`, not an error).

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::launch::slurm {

/// Slurm's job states (squeue(1) "JOB STATE CODES"), plus `unknown` for one this expctl does not know.
enum class JobState {
  pending,
  configuring,
  running,
  suspended,
  completing,
  completed,
  failed,
  cancelled,
  timeout,
  preempted,
  node_fail,
  out_of_memory,
  boot_fail,
  deadline,
  requeued,
  unknown,
};

/// "RUNNING", "CANCELLED by 0", "COMPLETED" ... -> the state (the first word; Slurm may append
/// flags or "by UID"). An unknown word is JobState::unknown.
JobState parse_state(std::string_view text);
/// The state as Slurm spells it ("RUNNING"); "UNKNOWN" for unknown.
std::string_view state_name(JobState state);
/// True when the job will not run again by itself (a requeue makes a final job pending again).
bool is_final(JobState state);

/// What `scontrol show job -o JOB` says of a job.
struct JobInfo {
  std::string id{};
  JobState state = JobState::unknown;
  std::string state_text{};  ///< as Slurm wrote it
  std::string reason{};      ///< "None", "BeginTime", "NonZeroExitCode" ...
  int restarts = 0;          ///< how often it was requeued (SLURM_RESTART_COUNT inside the job)
  bool requeue = false;      ///< whether it may be requeued
  std::optional<int> exit_code{};
  std::optional<int> exit_signal{};
  std::string node_list{};
  std::optional<std::chrono::seconds> run_time{};
  std::optional<std::chrono::seconds> time_limit{};  ///< none: UNLIMITED
  std::map<std::string, std::string> fields{};       ///< every Key=Value pair, as written
};

/// Parses `scontrol show job -o` (one line) or `scontrol show job` (several lines) output for one
/// job. Throws util::Failure naming the problem when the text has no JobId or JobState.
JobInfo parse_job(std::string_view text);

/// Slurm's durations: "UNLIMITED" (none), "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS",
/// or plain minutes ("30"). Throws util::Failure on anything else.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

/// The task ids of an array's ArrayTaskId field: "3", "4-7", "4,6,8-9", with an optional "%K".
/// Throws util::Failure on anything else.
std::vector<std::size_t> parse_task_ids(std::string_view text);

/// The job id of `sbatch --parsable` output ("123" or "123;cluster"). Throws util::Failure when the
/// output holds no id.
std::string parse_submitted(std::string_view output);

/// Why a job that ran stopped before its program ended, decided from the job's state and its
/// times, never from which signal arrived (a preemption and a time limit can send the same one).
/// `signal_lead`: how long before its time limit the job asked for its warning signal (sbatch
/// --signal=SIG@LEAD); a signalled job with no more than that (plus a minute) left is timing out.
/// `restarts_at_start`: the job's SLURM_RESTART_COUNT when this start began (-1: unknown); a
/// greater Restarts means Slurm requeued it, whatever the state says while it is torn down (a
/// requeue and a scancel both read COMPLETING then, on 22.05).
enum class StopCause { none, time_limit, preempted, node_failure, cancelled, requeued, failed };
StopCause stop_cause(const JobInfo& job, std::chrono::seconds signal_lead, int restarts_at_start = -1);
std::string_view stop_cause_name(StopCause cause);

/// The batch script of one run (`expctl run SPEC --slurm`): one task per node runs expctl's own
/// supervisor (`expctl slurm_job RUN`), which starts that node's ranks as `expctl run` does, so every
/// rank checkpoints and the run resumes under its id when Slurm starts the job again.
struct RunScript {
  std::string run_id{};
  std::string job_name{};
  std::string executable{};                   ///< the expctl the job runs (absolute)
  std::vector<std::string> global_options{};  ///< before the command: --db PATH [--runs-dir DIR]
  std::string output{};                       ///< --output (the job's stdout and stderr, appended across restarts)
  std::string working_dir{};                  ///< --chdir
  int nodes = 1;
  int ranks_per_node = 1;  ///< distributed.nproc_per_node
  int cpus_per_rank = 1;
  std::string time_limit{};  ///< --time; empty: the partition's default
  std::string partition{};
  std::string account{};
  std::chrono::seconds signal_lead{90};  ///< --signal=TERM@LEAD: the warning before the time limit
  bool allow_drift = false;
  std::vector<std::string> directives{};  ///< more #SBATCH options, after the defaults
  /// The job needs EXPCTL_DB (a team server) in its environment: the script stops with one line
  /// when sbatch did not hand it over (--export=NONE).
  bool needs_team_server = false;
};

/// The script, ending with a newline.
std::string render_run_script(const RunScript& script);

/// The Slurm commands, run with a timeout; every failure is a util::Failure of one line naming the
/// command, its exit code and its first line of error.
class Client {
 public:
  /// `env`: variables set (or, with nullopt, removed) for the commands, e.g. SLURM_CONF.
  explicit Client(std::map<std::string, std::optional<std::string>> env = {},
                  std::chrono::seconds timeout = std::chrono::seconds(30));
  /// sbatch --parsable [ARGS] SCRIPT: the job id.
  std::string submit(const std::filesystem::path& script, const std::vector<std::string>& args = {}) const;
  /// scontrol show job -o JOB (an array: its first record); none when Slurm no longer knows the
  /// job (purged after MinJobAge).
  std::optional<JobInfo> query(const std::string& job) const;
  /// scontrol show job -o JOB, one record per line: an array job's tasks each (its still pending
  /// remainder as one record, ArrayTaskId "4-7%2"); empty when Slurm no longer knows the job.
  std::vector<JobInfo> show_all(const std::string& job) const;
  /// scancel JOB, or scancel --signal=SIGNAL [--batch|--full] JOB when a signal is given.
  void cancel(const std::string& job, const std::string& signal = "", bool full = false) const;
  /// scontrol requeue JOB.
  void requeue(const std::string& job) const;

 private:
  std::string run(const std::vector<std::string>& argv, bool allow_invalid_job = false) const;

  std::map<std::string, std::optional<std::string>> m_env;
  std::chrono::seconds m_timeout;
};

}  // namespace expctl::launch::slurm
