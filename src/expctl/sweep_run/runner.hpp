#pragma once
/// Runs a sweep's jobs: each as a child `expctl run` (or `expctl resume`) in a slot of its own,
/// `slots.size()` at a time, in order. The run engine's signal handling is process-wide, so a
/// point never runs inside the sweep's process.
///
/// Ctrl-C, SIGTERM or SIGHUP stop the sweep: no job starts any more, the signal is forwarded once
/// to every running point (which checkpoints and ends `interrupted`; a second signal is forwarded
/// again, which kills their ranks), and the sweep ends interrupted after they have exited. A point
/// that exits 2 (bad input) or 3 (pinned stack mismatch) stops the sweep the same way, without a
/// signal: every later point would fail alike. A point that fails (exit 1) does not. A resume that
/// is refused (exit 2: no checkpoint intact on every rank, or the run is not resumable any more)
/// is that run's problem, not the sweep's: the point then starts anew.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "expctl/sweep/plan.hpp"
#include "expctl/sweep/slots.hpp"
#include "expctl/sweep/sweep.hpp"

namespace expctl::sweep_run {

/// Where the progress of a sweep goes: `redraw` lines replace the previous progress line on a
/// terminal; the others are events (a point started or ended) printed once.
using ProgressSink = std::function<void(const std::string& line, bool redraw)>;

/// The sink `expctl sweep` prints with: on a terminal (`tty`) one progress line redrawn in place,
/// events printed above it; elsewhere the events, and a progress line whenever the counts change.
ProgressSink stream_progress(std::ostream& out, bool tty);

struct RunnerOptions {
  std::filesystem::path executable;                ///< expctl itself (/proc/self/exe)
  std::vector<std::string> global_args;            ///< before the command: --db PATH, -v ...
  std::vector<sweep::Slot> slots;                  ///< at least one
  std::map<std::string, std::string> environment;  ///< the points' environment (slots add CUDA_VISIBLE_DEVICES)
  std::filesystem::path log_dir;                   ///< point-<I>.log (appended) and the point's stdout
  size_t done_before = 0;                          ///< runs already done, for the progress line
  size_t total_runs = 0;                           ///< for the progress line
  ProgressSink progress;                           ///< may be empty
  std::chrono::milliseconds redraw_every{1000};
};

/// How one job ended.
struct JobOutcome {
  sweep::Job job;
  size_t slot = 0;
  int exit_code = 0;
  std::string run_id;  ///< from the point's JSON output; empty when none was recorded
  double seconds = 0;
  std::filesystem::path log;
};

struct RunnerResult {
  std::vector<JobOutcome> outcomes;  ///< in the order the jobs ended
  size_t not_started = 0;            ///< jobs left when the sweep stopped
  bool interrupted = false;          ///< a signal stopped the sweep
  int stopped_by_exit = 0;           ///< 2 or 3 when a point's exit code stopped the sweep
};

/// The command line of `job`: `run BASE --set ... --tag sweep:... --format json`, or
/// `resume RUN --format json`, after `options.global_args`.
std::vector<std::string> job_argv(const sweep::Sweep& sweep, const sweep::Job& job, const RunnerOptions& options);

/// Runs `jobs`; returns when every started job has ended.
RunnerResult run_jobs(const sweep::Sweep& sweep, std::span<const sweep::Job> jobs, const RunnerOptions& options);

/// "3/8 runs done, 2 running, 1 failed, elapsed 1m02s, eta 1m40s" (eta "-" before a job ended).
struct ProgressState {
  size_t done = 0;
  size_t total = 0;
  size_t running = 0;
  size_t failed = 0;
  double elapsed_s = 0;
  double eta_s = -1;  ///< negative: unknown
};
std::string progress_line(const std::string& sweep_name, const ProgressState& state);

/// Seconds left: the queued jobs at the mean duration so far, plus what the running ones are
/// expected to need, over the slots. Negative when no job has ended yet.
double estimate_eta(std::span<const double> finished_s, std::span<const double> running_elapsed_s, size_t queued,
                    size_t slots);

/// "850ms", "42.0s", "3m05s", "2h04m".
std::string duration_text(double seconds);

}  // namespace expctl::sweep_run
