#pragma once
/// The supervisor: starts this node's ranks as child processes, captures their output into
/// per-rank logs and the console, listens to their control channels, and ends the run the moment
/// something goes wrong.
///
/// Policy, in one place:
/// - Fail fast. The first rank that exits non-zero, dies by a signal or stops answering (no
///   control line for `heartbeat_timeout`) is the root cause; every other rank gets SIGTERM, then
///   SIGKILL after `grace_period`. Failures after the first are consequences and never root causes.
/// - Interrupt. SIGINT/SIGTERM/SIGHUP to the supervisor is forwarded once to every rank as SIGTERM
///   (ranks finish the step, checkpoint, exit 0 or 130); a second one, or `interrupt_grace`
///   passing, sends SIGKILL. A rank that exits 130 on its own counts as an interrupt too.
/// - No orphans. Each rank leads its own process group and dies with the supervisor thread that
///   started it (PR_SET_PDEATHSIG); the destructor kills and reaps whatever is still running.
/// The supervisor never touches the database: records leave through `on_record`.

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "expctl/launch/environment.hpp"
#include "expctl/launch/launch_plan.hpp"
#include "expctl/launch/process_usage.hpp"
#include "expctl/util/sandbox.hpp"

namespace expctl::launch {

/// The exit code a rank uses for "asked to stop, checkpoint written" (128 + SIGINT).
inline constexpr int k_interrupted_exit_code = 130;
/// The exit code a rank uses for "the loss is not finite" (EX_DATAERR): the run is `diverged`.
inline constexpr int k_diverged_exit_code = 65;

/// What a rank writes on its control channel.
enum class ControlProtocol {
  /// expctl's own lines (control_channel.hpp): heartbeats and "record <payload>".
  expctl,
  /// A user's program (docs/program.md): every line is a record, handed to the record sink as it
  /// is, whatever it holds (the caller decodes it). EXPCTL_METRICS_FD names the channel too.
  lines,
};

/// One process to start.
struct RankSpec {
  int rank = 0;                   ///< global rank: names the log file and console prefix
  std::vector<std::string> argv;  ///< argv[0] is looked up in PATH
  EnvOverrides env;               ///< applied on top of SupervisorOptions::environment
  std::filesystem::path workdir = {};  ///< the directory it starts in; empty: the supervisor's
  ControlProtocol protocol = ControlProtocol::expctl;
  /// Sandboxed from its first instruction (util/sandbox.hpp: a program with program.sandbox):
  /// where it may write. nullopt: not sandboxed.
  std::optional<util::sandbox::Writable> sandbox = std::nullopt;
};

/// One RankSpec per planned local rank, all running `argv` with the plan's environment.
std::vector<RankSpec> rank_specs(const LaunchPlan& plan, const std::vector<std::string>& argv);

/// Receives console lines, already prefixed "[rank N] ".
using ConsoleSink = std::function<void(std::string_view line)>;
/// Receives each record a rank sends on its control channel (see control_channel.hpp); the view
/// is valid during the call only. Called on the supervisor's thread, in order per rank; an
/// exception thrown here ends wait() (the ranks are then killed by the destructor).
using RecordSink = std::function<void(int rank, std::string_view record)>;
struct RankExit;
/// Told about each rank as it ends (before the run's verdict is known), e.g. to record it.
using RankExitSink = std::function<void(const RankExit& exit)>;

struct SupervisorOptions {
  /// Where rank-<N>.log files are written (created if missing, appended to); empty: no files.
  std::filesystem::path log_dir;
  /// Environment the ranks inherit before their RankSpec::env; nullopt: this process's.
  std::optional<EnvMap> environment;
  /// From SIGTERM to SIGKILL when stopping ranks after a failure: long enough to flush logs.
  std::chrono::milliseconds grace_period{std::chrono::seconds(5)};
  /// From the forwarded interrupt to SIGKILL: long enough to finish a step and checkpoint.
  std::chrono::milliseconds interrupt_grace{std::chrono::seconds(60)};
  /// A rank silent on its control channel this long has stopped answering; 0 disables the check
  /// (ranks that do not speak the protocol).
  std::chrono::milliseconds heartbeat_timeout{0};
  /// The whole run fails after this long; 0: no limit.
  std::chrono::milliseconds run_timeout{0};
  /// How many of each rank's last output lines are kept for the root-cause report.
  size_t tail_lines = 50;
  /// Console output; null: written to stderr.
  ConsoleSink console;
  /// Control-channel records; null: dropped.
  RecordSink on_record;
  /// Each running rank's CPU use (percent of one core) and resident memory (MiB), its process and
  /// every process under it, and its GPU utilization and memory where NVML sees its processes on a
  /// GPU (process_usage.hpp), read every `usage_every` by the supervisor's own loop; null or 0: not
  /// read.
  std::function<void(int rank, const UsageRate::Sample& sample)> on_usage;
  std::chrono::milliseconds usage_every{0};
  /// Rank ends, in the order the supervisor saw them; null: not reported.
  RankExitSink on_rank_exit;
  /// Polled every tick: a message ends the run as failed with it as the root cause (for faults
  /// outside the ranks, e.g. a results store that can no longer be written); null: never.
  std::function<std::optional<std::string>()> abort_check;
  /// Called with a rank that stopped answering, while it still exists and before any rank is
  /// stopped (e.g. to save its native stack); it may take a few seconds. null: nothing.
  std::function<void(int rank, pid_t pid)> on_unresponsive;
  /// Judge a rank's silence (heartbeat_timeout, and "the silent peer" of a failure) only once it
  /// has written its first control line: a user's program that never speaks the protocol is not
  /// taken for a hung one.
  bool silence_counts_after_first_line = false;
  /// Catch SIGINT/SIGTERM/SIGHUP during wait() (one supervisor per process at a time).
  bool handle_signals = true;
};

enum class RunStatus { completed, failed, interrupted };

/// "completed", "failed" or "interrupted" (the store's run states).
std::string_view to_string(RunStatus status);

/// How one rank ended.
struct RankExit {
  int rank = 0;
  pid_t pid = 0;
  int exit_code = -1;                  ///< -1 when killed by a signal
  int signal = 0;                      ///< terminating signal, 0 when it exited
  bool stopped_by_supervisor = false;  ///< it had been sent SIGTERM/SIGKILL before it ended
};

/// "exited with code 3", "exited normally" or "was killed by SIGKILL".
std::string describe(const RankExit& exit);

/// Why a run failed (or was interrupted by a rank): the first thing that went wrong.
struct RootCause {
  std::optional<int> rank;  ///< none for a whole-run timeout
  /// "rank 1 exited with code 3", "rank 0 was killed by SIGKILL",
  /// "rank 1 stopped answering (no heartbeat for 2 s)", "the run timed out after 10 s"
  std::string description;
  std::vector<std::string> last_lines;  ///< the rank's last output lines, oldest first
  /// Every rank's last heartbeat payload when it happened (rank -> "step=42 phase=backward"),
  /// ranks that sent none left out: where the stuck rank was and what the others waited for.
  std::map<int, std::string> heartbeats;
};

struct Outcome {
  RunStatus status = RunStatus::completed;
  std::vector<RankExit> ranks;          ///< in RankSpec order
  std::optional<RootCause> root_cause;  ///< set when failed, and when a rank's 130 interrupted the run
  /// The signal the supervisor received, if any; also one that came while a failure stopped the
  /// ranks (the run is failed, and distributed.max_restarts does not restart it).
  std::optional<int> interrupt_signal;
  std::chrono::milliseconds wall_time{0};
};

/// "SIGKILL" for 9; "signal 64" for numbers without a name.
std::string signal_name(int signal);

namespace detail {
class RankProcess;
}

/// Ranks started before their run exists. `expctl run` starts them first thing, so that each
/// loads LibTorch while the supervisor fingerprints the stack and records the run (about 40 ms
/// that the ranks used to wait for). Each waits on its standard input for one line (the run's
/// folder); Supervisor::start(HeldRanks&&, line) sends it and supervises them from then on. Held
/// ranks never sent a line (the run was refused, or could not be recorded) are killed and reaped
/// when this object goes; they have written nothing anywhere.
class HeldRanks {
 public:
  /// Starts each rank with `environment` (nullopt: this process's) under its RankSpec's env.
  /// Throws util::LaunchError like Supervisor::start; those already started are killed.
  HeldRanks(const std::vector<RankSpec>& ranks, const std::optional<EnvMap>& environment = std::nullopt);
  ~HeldRanks();
  HeldRanks(HeldRanks&& other) noexcept;
  HeldRanks& operator=(HeldRanks&& other) noexcept;
  HeldRanks(const HeldRanks&) = delete;
  HeldRanks& operator=(const HeldRanks&) = delete;

  std::vector<pid_t> pids() const;

 private:
  friend class Supervisor;
  std::vector<std::unique_ptr<detail::RankProcess>> m_ranks;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options = {});
  /// Kills (SIGKILL to each rank's process group) and reaps every rank still running.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Starts the ranks. Throws util::LaunchError when one cannot be started (the program is
  /// missing, a log file cannot be created); those already started are killed by the destructor.
  void start(const std::vector<RankSpec>& ranks);
  /// Takes over ranks started earlier: sends each `line` (and a newline) on its standard input,
  /// then supervises them as if start() had started them. SupervisorOptions::environment is not
  /// used (they have theirs already).
  void start(HeldRanks&& held, std::string_view line);
  /// Supervises the started ranks until every one has ended, and says how the run went.
  Outcome wait();
  /// start() then wait().
  Outcome run(const std::vector<RankSpec>& ranks);

  /// Process ids of the started ranks, in RankSpec order (each also its process group id).
  std::vector<pid_t> pids() const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace expctl::launch
