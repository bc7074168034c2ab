#pragma once
/// Outcome mapping, in one place: how the supervisor's launch status and the ranks' records
/// become the run's stored status, its exit code and its root cause.
///
///   launch status   rank exit                 store status   exit code
///   completed       every rank 0              completed      0
///   interrupted     130 / signal forwarded    interrupted    130
///   failed          65 (loss not finite)      diverged       1
///   failed          anything else             failed         1
///   (store failure, launch error)             failed         1

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "expctl/launch/supervisor.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/store/types.hpp"
#include "expctl/util/exit_code.hpp"

namespace expctl::run {

struct Verdict {
  store::RunStatus status = store::RunStatus::completed;
  util::ExitCode exit_code = util::ExitCode::ok;
  std::string root_cause;
};

/// The store status of a launch status.
store::RunStatus store_status(launch::RunStatus status);
/// The exit code of `expctl run` for a run that ended `status`.
util::ExitCode exit_code_of(store::RunStatus status);
/// How one rank ended, as a store status.
store::RunStatus rank_status(const launch::RankExit& exit);

/// Lines that are not the rank's own words (glog's "Logging before InitGoogleLogging()" and its
/// prefixed lines, c10d's "[W ...]" warnings): kept in the log, left out of root causes.
bool is_log_noise(std::string_view line);
/// The root cause as stored: the description, then the rank's last meaningful lines.
std::string root_cause_text(const launch::Outcome& outcome);
/// "the loss is not finite at step 37 (rank 0: nan, rank 1: 2.31)".
std::string divergence_text(const Divergence& divergence);

/// The verdict of a supervised run. `divergence` is the recorder's first non-finite step;
/// `last_steps` the last step each rank reported (named when a rank stopped answering).
Verdict verdict_of(const launch::Outcome& outcome, const std::optional<Divergence>& divergence,
                   const std::map<int, std::int64_t>& last_steps = {});

}  // namespace expctl::run
