#pragma once
/// What `expctl watch` shows: each rank's latest step as the store holds it, read through a
/// read-only connection while the run writes (WAL readers never block the writer). The view is
/// built from a few primary-key range reads per rank (Store::recent_metrics), so a refresh costs
/// the same at step 10 and at step 100000.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/phases.hpp"
#include "expctl/api/run_folder.hpp"
#include "expctl/store/store.hpp"

namespace expctl::api {

/// Steps whose phase timers are averaged for the shares (the latest ones).
inline constexpr int k_watch_window = 10;
/// A rank whose latest straggler score is at least this is marked a straggler.
inline constexpr double k_straggler_mark = 1.2;

/// Where one rank's step time went, as shares of it (here: over the latest k_watch_window steps).
using PhaseShares = compare::PhaseShares;

struct RankView {
  int rank = 0;
  store::RunStatus status = store::RunStatus::running;
  std::optional<std::int64_t> step;  ///< the latest stored step; none before the first
  std::optional<double> loss;
  std::optional<double> samples_per_sec;
  std::optional<double> step_time_ms;  ///< mean over the window
  std::optional<double> comm_wait_ms;  ///< mean over the window
  std::optional<PhaseShares> phases;
  std::optional<double> straggler_score;  ///< at the latest step (2 ranks or more)
  bool straggler = false;                 ///< straggler_score >= k_straggler_mark
  /// Seconds since this watcher last saw the rank's step change (set by the caller, who polls).
  std::optional<double> quiet_for_s;
};

struct WatchView {
  store::RunRecord run;
  std::optional<std::int64_t> total_steps;  ///< from the run's resolved spec, when known
  std::vector<RankView> ranks;
  /// True once the run has ended; a run waiting for its scheduler's job (queued, also after a
  /// requeue) has not.
  bool ended() const { return store::has_ended(run.status); }
  /// "  (what it waits for)" for a queued run, else empty.
  std::string waiting() const {
    return run.status == store::RunStatus::queued ? "  (" + run.root_cause + ")" : std::string();
  }
  /// The furthest step any rank has stored (0 before the first).
  std::int64_t latest_step() const;
};

/// The run `expctl watch [RUN]` watches: without a selector the newest running run, else the
/// newest run; otherwise the one run `selector` names (compare::resolve_one). Throws
/// util::UsageError for a store without runs.
std::string watched_run(const store::Store& store, const std::string& selector);

/// The view of `run_id` now. The planned step count comes from the run folder's resolved.json
/// when `folder` allows reading it.
WatchView watch_view(const store::Store& store, const std::string& run_id, const FolderAccess& folder = {});

/// `watch --format json`'s object for one refresh (one line per refresh).
nlohmann::json view_json(const WatchView& view);

/// `watch`'s text for one refresh: a headline (run, status, step of the planned steps, what a
/// queued run waits for) and one row per rank (step, loss, throughput, where the time went, the
/// straggler score, how long its step has not changed). Stored strings are raw: terminal_safe it.
std::string view_text(const WatchView& view);

/// Tracks each rank's step across polls, to fill RankView::quiet_for_s.
class QuietClock {
 public:
  void update(WatchView& view, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

 private:
  std::map<int, std::pair<std::int64_t, std::chrono::steady_clock::time_point>> m_seen;
};

}  // namespace expctl::api
