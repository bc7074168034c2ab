#pragma once
/// The event-file layout of one run, written from its metric points as they arrive: the run
/// engine feeds it while a run goes on, and export_runs replays a finished run's stored points
/// through the same code, so live and exported files hold the same scalars, steps and times.
///
///   <out>/<run id>/rank<R>/   every per-step metric of rank R, tagged as stored ("loss", "lr",
///                             "step_time_ms", ...; rank 0 also "eval_loss", "eval_accuracy")
///   <out>/<run id>/job/       the job-wide series of k_job_series, one point per step that every
///                             rank has reported
///
/// Wall times are derived, not measured: a rank's point at step S is stamped with the run's
/// started_at plus the sum of that rank's step_time_ms up to and including S (points that come
/// without a step time, such as eval, take the sum so far); a job point takes the latest of its
/// ranks. The store keeps no per-step timestamp, and deriving them is what lets an export made
/// weeks later write the same file contents as the live writer did.
///
/// One thread at a time (the recorder's writer thread). Write errors are ExportError (exit 1).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/store/types.hpp"
#include "expctl/tensorboard/event_writer.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::tensorboard {

/// One job-wide series: its tag in <run id>/job/ and how it is computed from the ranks' points.
struct JobSeries {
  std::string_view tag;
  std::string_view definition;
};

/// The job-wide series, in the order each job event carries them.
inline constexpr JobSeries k_job_series[] = {
    {util::metric::samples_per_sec, "sum over ranks of samples_per_sec: the job's throughput"},
    {util::metric::step_time_ms, "max over ranks of step_time_ms: the slowest rank sets the pace"},
    {util::metric::comm_wait_fraction, "sum over ranks of comm_wait_ms / sum over ranks of step_time_ms"},
    {util::metric::loss, "mean over ranks of loss"},
};

/// One event file that was written, and how many scalar values it holds.
struct WrittenFile {
  std::filesystem::path path{};
  std::int64_t points = 0;
};

struct LiveOptions {
  /// Ranks whose points of a step make that step's job point complete; until then the step's
  /// inputs wait in memory. 0: job points are written by finish() only.
  int world_size = 0;
  /// For a resumed invocation: the checkpoint step it continues after. Each new file then starts
  /// with SessionLog START at resumed_from + 1 (or at its first step, when that is earlier), so
  /// TensorBoard drops the steps after the checkpoint that the earlier invocation's files hold
  /// (they are logged again).
  std::optional<std::int64_t> resumed_from{};
  /// Per rank, the step time (ms) spent before this invocation's first step, so that wall times go
  /// on from where the stored run left off (resumed_options in export.hpp fills it in).
  std::map<int, double> elapsed_ms{};
};

namespace detail {
/// What one rank's points of one step contribute to the job point of that step.
struct RankInputs {
  double wall_time = 0.0;
  double step_time_ms = 0.0;
  std::optional<double> comm_wait_ms{};
  std::optional<double> samples_per_sec{};
  std::optional<double> loss{};
};
}  // namespace detail

class LiveExport {
 public:
  /// Writes under `out_dir`/`run_id`/; folders and files appear with the first point that goes
  /// into them. `started_at` is the run's started_at (stored as RunRecord::started_at).
  LiveExport(const std::filesystem::path& out_dir, const std::string& run_id, store::Clock::time_point started_at,
             LiveOptions options = {});
  /// The same for a stored run: its id, and its started_at read as export_runs reads it (to the
  /// millisecond), which live and exported wall times must share to agree.
  LiveExport(const std::filesystem::path& out_dir, const store::RunRecord& run, LiveOptions options = {});
  /// finish(), with errors dropped: call finish() to see them.
  ~LiveExport();
  LiveExport(const LiveExport&) = delete;
  LiveExport& operator=(const LiveExport&) = delete;

  /// Writes `points` (buffered; see flush). A rank's points of one step should arrive together,
  /// in one call, and a rank's steps in increasing order, as the recorder queues them.
  void on_points(std::span<const store::MetricPoint> points);
  /// Hands everything written to the kernel, so TensorBoard sees it; `sync` also fdatasync()s.
  void flush(bool sync = false);
  /// Writes the job points of steps that every rank seen so far has reported (ranks of another
  /// node that never report are not waited for), then flushes and closes every file.
  void finish();

  /// `out_dir`/`run_id`.
  const std::filesystem::path& run_dir() const { return m_run_dir; }
  /// Every file written so far: ranks in order, then job.
  std::vector<WrittenFile> files() const;

 private:
  using PendingStep = std::map<int, detail::RankInputs>;
  struct RankState {
    std::optional<EventWriter> writer{};
    double elapsed_ms = 0.0;
  };

  void write_group(std::span<const store::MetricPoint> group);
  void add_job_inputs(int rank, std::int64_t step, double wall_time, std::span<const store::MetricPoint> group);
  void write_job_step(std::int64_t step, const PendingStep& ranks);
  RankState& rank_state(int rank);
  EventWriter open_writer(const std::string& folder, double wall_time, std::int64_t first_step) const;

  std::filesystem::path m_run_dir;
  double m_started = 0.0;  // seconds since the Unix epoch
  LiveOptions m_options;
  std::map<int, RankState> m_ranks;
  std::optional<EventWriter> m_job;
  std::map<std::int64_t, PendingStep> m_pending;
  std::set<int> m_job_ranks;  // ranks that reported a step time
  bool m_finished = false;
};

}  // namespace expctl::tensorboard
