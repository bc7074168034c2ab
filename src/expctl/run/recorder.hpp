#pragma once
/// Records -> store, off the supervisor's thread. The supervisor hands every control-channel
/// record to `on_record` and returns to its poll loop at once; a writer thread turns records into
/// metric points and writes them in batches (one transaction per batch, a few a second). Other
/// writes (rank states, artifacts, the run's heartbeat) go through the same thread in order, so
/// one connection is used by one thread at a time.
///
/// A store locked by another process delays writes, never the ranks: records stay buffered, a
/// console note says so after k_locked_note_after, and writing resumes when the lock is gone. Any
/// other store failure (disk full, I/O error) is fatal: the supervisor polls fatal_error() and ends
/// the run (the ranks are stopped) with that root cause.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/run/console.hpp"
#include "expctl/store/store.hpp"
#include "expctl/train/records.hpp"
#include "expctl/util/error.hpp"

namespace expctl::run {

/// A locked store is mentioned on the console after this long, and again every k_locked_note_every.
inline constexpr std::chrono::seconds k_locked_note_after{3};
inline constexpr std::chrono::seconds k_locked_note_every{30};
/// The run's heartbeat in the store (for `lost` detection from other hosts) is renewed this often.
inline constexpr std::chrono::seconds k_store_heartbeat_every{10};

/// The first step whose loss was not finite, as the ranks reported it.
struct Divergence {
  std::int64_t step = 0;
  std::map<int, double> losses;  ///< rank -> its loss at that step (every reporting rank)
};

/// True for the store's "still in use by another process" error (worth waiting for).
bool is_store_busy(const util::Failure& error);

class Recorder {
 public:
  using Write = std::function<void(store::Store&)>;

  Recorder(store::Store& store, std::string run_id, std::filesystem::path run_dir, Console& console,
           std::chrono::steady_clock::time_point start);
  /// Writes what is queued (waiting while the store is locked) and stops the writer thread.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// One control-channel record of `rank`. Never throws (the supervisor drains ranks' output in
  /// destructors): a fatal store error is reported by fatal_error(), which the supervisor polls.
  void on_record(int rank, std::string_view payload);
  /// A record already parsed (external-launcher rank 0 trains in this process).
  void on_json(int rank, const nlohmann::json& record);
  /// Throws the writer's fatal error as a StoreError, if there was one.
  void throw_if_fatal() const;
  /// Queues another write, after the records received so far.
  void post(Write write);
  /// Blocks until everything queued is written, or a fatal error stopped the writer.
  void drain();
  /// The writer's fatal error message, once there was one.
  std::optional<std::string> fatal_error() const;

  /// Seconds from process start to the beginning of rank 0's first optimizer step.
  std::optional<double> time_to_first_step() const;
  /// The first non-finite step reported, if any.
  std::optional<Divergence> divergence() const;
  /// The last step each rank reported (local and remote ranks).
  std::map<int, std::int64_t> last_steps() const;

 private:
  void on_step(int rank, const train::StepMetrics& step);
  void on_remote_steps(const nlohmann::json& record);
  void on_checkpoint(const nlohmann::json& record);
  void push_points(int rank, const train::StepMetrics& step);
  void enqueue_points();
  void writer_loop();
  bool write_one(Write& write);
  void note_if_locked();

  store::Store& m_store;
  std::string m_run_id;
  std::filesystem::path m_run_dir;
  Console& m_console;
  std::chrono::steady_clock::time_point m_start;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_idle;
  std::vector<store::MetricPoint> m_points;  // not yet queued
  std::chrono::steady_clock::time_point m_last_enqueue = std::chrono::steady_clock::now();
  std::deque<Write> m_queue;
  bool m_writing = false;
  std::chrono::steady_clock::time_point m_write_started{};
  std::optional<std::chrono::steady_clock::time_point> m_locked_noted;
  bool m_done = false;
  std::optional<std::string> m_fatal;
  std::optional<double> m_time_to_first_step;
  std::optional<Divergence> m_divergence;
  std::map<int, std::int64_t> m_steps;
  std::thread m_thread;  // last: started once everything above exists
};

}  // namespace expctl::run
