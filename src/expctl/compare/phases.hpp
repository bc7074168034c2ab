#pragma once
/// Where each rank's step time went over a run, and its straggler timeline, from the phase
/// timers every rank stores per step (docs/run.md, "Metrics recorded"): read with SQL sums and
/// one range scan, for `show`, `watch` and the compare reports.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::compare {

/// The per-step metric of a rank's compute time over the median rank's (run/recorder.hpp).
inline constexpr const char* k_straggler_series = util::metric::straggler_score;

/// Shares of step time per phase; none for a phase the rank did not time (a program's run
/// stores only what the program logs: its phases are not measured, which is not 0 %).
struct PhaseShares {
  std::optional<double> data;
  std::optional<double> forward;
  std::optional<double> backward;
  std::optional<double> comm;  ///< exposed communication wait
  std::optional<double> optimizer;

  /// Whether any phase was timed.
  bool any() const { return data || forward || backward || comm || optimizer; }
};

/// One rank over a whole run.
struct RankPhases {
  int rank = 0;
  std::int64_t steps = 0;
  double step_time_ms = 0.0;  ///< mean
  PhaseShares shares;
  /// The share no phase timer covers (bookkeeping); known only when every phase was timed.
  std::optional<double> other;
  std::optional<double> straggler_mean;
  std::optional<double> straggler_max;
};

/// One row per rank that stored step times; empty for a run without any. Seven SQL sums over
/// every step of every rank: the runner keeps the result in the run's summary (`phases`).
std::vector<RankPhases> phase_breakdown(const store::Store& store, const std::string& run_id);

/// The rows as the JSON of summaries, `show --format json` and the compare reports:
/// `[{rank, steps, step_time_ms, shares{data,forward,backward,comm,optimizer,other}, straggler_mean, straggler_max}]`;
/// a share not measured is null.
nlohmann::json phases_json(const std::vector<RankPhases>& phases);

/// The rows a run's summary keeps (`phases`, written by run::compute_summary), or nullopt for a
/// summary without them (runs of older versions, hand-made stores).
std::optional<std::vector<RankPhases>> phases_from_json(const nlohmann::json& summary);

/// The run's rows: from its (parsed) summary when it has them, else from the stored series.
std::vector<RankPhases> run_phases(const store::Store& store, const std::string& run_id, const nlohmann::json& summary);

/// The job's straggler score per step: the slowest rank's (max over ranks); empty for one rank.
struct StragglerTimeline {
  std::vector<std::int64_t> steps;
  std::vector<double> scores;
};
StragglerTimeline straggler_timeline(const store::Store& store, const std::string& run_id);

}  // namespace expctl::compare
