#pragma once
/// Records -> store, off the supervisor's thread. The supervisor hands every control-channel
/// record to `on_record` and returns to its poll loop at once; a writer thread turns records into
/// metric points and writes them in batches (one transaction per batch, a few a second). Other
/// writes (rank states, artifacts, the run's heartbeat) go through the same thread in order, so
/// one connection is used by one thread at a time.
///
/// A store locked by another process delays writes, never the ranks: records stay buffered, a
/// note to the observer says so after k_locked_note_after, and writing resumes when the lock is gone. Any
/// other store failure (disk full, I/O error) is fatal: the supervisor polls fatal_error() and ends
/// the run (the ranks are stopped) with that root cause.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/phases.hpp"
#include "expctl/launch/process_usage.hpp"
#include "expctl/run/observer.hpp"
#include "expctl/store/store.hpp"
#include "expctl/tensorboard/live_export.hpp"
#include "expctl/train/metric_sink.hpp"
#include "expctl/train/records.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {

/// A locked store is noted to the observer after this long, and again every k_locked_note_every.
inline constexpr std::chrono::seconds k_locked_note_after{3};
inline constexpr std::chrono::seconds k_locked_note_every{30};
/// The run's heartbeat in the store (for `lost` detection from other hosts) is renewed this often.
inline constexpr std::chrono::seconds k_store_heartbeat_every{10};

/// The first step whose loss was not finite, as the ranks reported it.
struct Divergence {
  std::int64_t step = 0;
  std::map<int, double> losses;  ///< rank -> its loss at that step (every reporting rank)
};

/// True for a store failure of kind busy (another process holds the lock: worth waiting for).
bool is_store_busy(const std::exception& error);

/// The per-step metric that marks stragglers: a rank's compute time (forward + backward +
/// optimizer, train::compute_seconds) over the median of every rank's at that step. 1.0 is the
/// typical rank; the slowest rank's value is the step's straggler score (e.g. 1.4: 40 % slower).
inline constexpr std::string_view k_straggler_metric = compare::k_straggler_series;

/// A timer as stored: seconds (a double, as the trainer hands them over) to whole nanoseconds, in
/// milliseconds. The steady clock counts nanoseconds, so this keeps all it measured and drops
/// only the residue of seconds held in doubles (0.016729728 s x 1000 is 16.729727999999998;
/// stored, 16.729728): a short decimal, which the store packs in ~3 bytes a point (chunk format
/// 3) against ~7 for a full-precision double.
double stored_milliseconds(double seconds);

/// A derived ratio as stored (throughput, straggler score, CPU percent): to 6 significant digits
/// (whole numbers from a million up), a relative 5e-7, far below what the timers and tick counts
/// it is computed from resolve; a short decimal the store packs in ~2 bytes a point instead of
/// ~7 for the quotient's 53 bits. Not for loss, accuracy or lr, which are stored as recorded.
double stored_ratio(double value);

/// Each rank's straggler score for one step, from the steps of `ranks` (rank -> its step);
/// empty unless at least 2 and at least `expected` ranks reported.
std::map<int, double> straggler_scores(const std::map<int, train::StepMetrics>& ranks, int expected);

/// What the ranks reported about the run as a whole, for its summary.
struct RunFacts {
  std::optional<double> time_to_first_step;  ///< seconds from process start to rank 0's first optimizer step
  std::optional<std::string> allreduce;      ///< the all-reduce rank 0 ran ("shm", "hierarchical", "gloo", "nccl")
  std::set<std::string> skipped_images;      ///< image files any rank passed over (data.on_bad_image skip)
  /// Under train.amp, how the last evaluation ran and why not as training does (train::EvalMetrics).
  std::optional<std::string> eval_precision;
  std::optional<std::string> eval_fallback;
};

class Recorder {
 public:
  using Write = std::function<void(store::Store&)>;

  /// `live_ranks`: how many ranks send their steps to this recorder as they train (the ranks this
  /// node supervises; 1 for an external launcher's rank 0): the straggler score is computed over
  /// them. Ranks of other nodes, reported at the end, get none.
  Recorder(store::Store& store, std::string run_id, std::filesystem::path run_dir, RunObserver& observer,
           std::chrono::steady_clock::time_point start, int live_ranks = 1);
  /// Writes what is queued (waiting while the store is locked) and stops the writer thread.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// One control-channel record of `rank`, decoded into the typed calls below: every field is read
  /// with its type checked, and a record of another shape is dropped (fuzz_control_record). Never
  /// throws (the supervisor drains ranks' output in destructors): a fatal store error is reported
  /// by fatal_error(), which the supervisor polls.
  void on_record(int rank, std::string_view payload);

  /// A rank's records as train::MetricSink's typed calls: what on_record decodes a rank's line
  /// into, and what rank 0 under an external launcher, which trains in this process, hands over
  /// as it is (RankZeroSink in external.cpp). Each hands the points that are due to the writer.
  /// Never throw, as on_record.
  void on_start(const train::TrainingStart& start);
  void on_step(int rank, const train::StepMetrics& step);
  void on_eval(const train::EvalMetrics& eval);
  void on_checkpoint(const train::CheckpointFile& file);
  /// Rank 0's report of another rank's steps (`rank`), at the end.
  void on_remote_steps(int rank, const std::vector<train::StepMetrics>& steps);
  void on_collectives(const std::string& allreduce);
  void on_skipped_images(const std::vector<std::string>& files);
  /// A reading of a rank's CPU use and memory (launch::SupervisorOptions::on_usage): stored as
  /// sys_cpu_percent and sys_rss_mb (and sys_gpu_percent, sys_gpu_mem_mb where the rank uses a
  /// GPU) at the last step the rank reported, at most once a step (each series only grows;
  /// nothing before the rank's first step).
  void on_usage(int rank, const launch::UsageRate::Sample& sample);
  /// Whether the ranks' system metrics are taken (once a second, for on_usage): unless
  /// EXPCTL_SYS_METRICS=0, the switch bench/sys_metrics.sh measures their cost with.
  static bool usage_wanted();
  /// A step a user's program logged (program_records.hpp): `points` are stored as they are (the
  /// program's own series, and what follows from them: step_time_ms, samples_per_sec), so a
  /// program run is read by the same summary, compare and export code as a built-in one.
  void on_logged_step(int rank, std::int64_t step, std::vector<store::MetricPoint> points);
  /// Throws the writer's fatal error as a StoreError, if there was one.
  void throw_if_fatal() const;
  /// Also writes every point, as it is stored, to TensorBoard event files (tensorboard/
  /// live_export.hpp); call before the ranks start. A write error there is noted once to the
  /// observer and ends the export, never the run (the store has every point).
  void export_tensorboard(std::unique_ptr<tensorboard::LiveExport> live);
  /// Queues another write, after the records received so far.
  void post(Write write);
  /// Blocks until everything queued is written, or a fatal error stopped the writer.
  void drain();
  /// The writer's fatal error message, once there was one.
  std::optional<std::string> fatal_error() const;
  /// True while the writer keeps up: at most a couple of batches queued, none being written for
  /// longer than k_locked_note_after (a locked store), fewer than 16 steps held for slower ranks. Then what
  /// the ranks reported more than seconds ago is in the store (the record journal's compaction).
  bool keeping_up() const;

  /// What the ranks reported about the run as a whole (RunFacts).
  RunFacts facts() const;
  /// The first non-finite step reported, if any.
  std::optional<Divergence> divergence() const;
  /// The last step each rank reported (local and remote ranks).
  std::map<int, std::int64_t> last_steps() const;

 private:
  // The typed call a record of `rank` decodes into; nothing for a record of another shape.
  // Returns whether a typed call took it.
  bool on_json(int rank, const nlohmann::json& record);
  // Moves points due for writing to the writer, and notes a store locked for a while (calling it
  // again at once does nothing more).
  void after_record();
  struct HeldStep {
    std::map<int, train::StepMetrics> ranks;
    std::vector<store::MetricPoint> rank0_extra;  // eval points of the step, after rank 0's others
  };
  void hold(int rank, const train::StepMetrics& step);
  void emit_held_through(std::int64_t step);
  void push_points(int rank, const train::StepMetrics& step);
  void push_points_locked(int rank, const train::StepMetrics& step, std::optional<double> straggler);
  void enqueue_points();
  void writer_loop();
  void write_points(store::Store& store, const std::vector<store::MetricPoint>& points);
  void finish_tensorboard();
  bool write_one(Write& write);
  void note_if_locked();

  store::Store& m_store;
  std::string m_run_id;
  std::filesystem::path m_run_dir;
  RunObserver& m_observer;
  std::chrono::steady_clock::time_point m_start;
  int m_live_ranks;

  mutable std::mutex m_mutex;
  std::map<std::int64_t, HeldStep> m_held;  // steps not yet reported by every live rank
  std::int64_t m_emitted_step = 0;
  std::condition_variable m_wake;
  std::condition_variable m_idle;
  std::vector<store::MetricPoint> m_points;  // not yet queued
  std::map<int, std::int64_t> m_usage_steps;  // the step of each rank's last usage reading
  std::chrono::steady_clock::time_point m_last_enqueue = std::chrono::steady_clock::now();
  std::deque<Write> m_queue;
  bool m_writing = false;
  std::chrono::steady_clock::time_point m_write_started{};
  std::optional<std::chrono::steady_clock::time_point> m_locked_noted;
  bool m_done = false;
  std::optional<std::string> m_fatal;
  RunFacts m_facts;
  std::optional<Divergence> m_divergence;
  std::map<int, std::int64_t> m_steps;
  std::shared_ptr<tensorboard::LiveExport> m_tensorboard;  // used by the writer thread only
  std::thread m_thread;  // last: started once everything above exists
};

}  // namespace expctl::run
