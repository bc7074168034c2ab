// distributed.max_restarts: which ends of an attempt a restart may cure (run/restarts.cpp). The
// restarts themselves run in tests/cli/test_cli_restarts.cpp.
#include <csignal>

#include <catch2/catch.hpp>

#include "expctl/run/lifecycle.hpp"

namespace {

using namespace expctl;

launch::Outcome ended_by(launch::RunStatus status, std::optional<int> rank, const std::string& description,
                         int exit_code = -1, int signal = 9) {
  launch::Outcome outcome;
  outcome.status = status;
  outcome.ranks = {{0, 100, 0, 0, true}, {1, 101, 0, 0, true}};
  const auto ended = outcome.ranks.begin() + rank.value_or(0);  // the rank named, or rank 0
  *ended = {ended->rank, ended->pid, exit_code, signal, false};
  outcome.root_cause = launch::RootCause{rank, description, {}, {}};
  return outcome;
}

std::optional<std::string> death_of(const launch::Outcome& outcome, const std::map<int, std::int64_t>& steps = {}) {
  return run::lifecycle::rank_death(outcome, run::verdict_of(outcome, std::nullopt, steps), steps);
}

}  // namespace

TEST_CASE("restarts: a rank's death is restartable and named with its last step", "[run][restarts]") {
  const auto killed = ended_by(launch::RunStatus::failed, 1, "rank 1 was killed by SIGKILL");
  CHECK(death_of(killed, {{0, 40}, {1, 37}}) == "rank 1 was killed by SIGKILL after step 37");
  CHECK(death_of(killed) == "rank 1 was killed by SIGKILL");  // it reported no step
  const auto crashed = ended_by(launch::RunStatus::failed, 0, "rank 0 exited with code 3", 3, 0);
  CHECK(death_of(crashed) == "rank 0 exited with code 3");
  const auto silent =
      ended_by(launch::RunStatus::failed, 1, "rank 1 stopped answering (no heartbeat for 20 s)", -1, SIGKILL);
  CHECK(death_of(silent, {{1, 12}}) == "rank 1 stopped answering (no heartbeat for 20 s) after step 12");
}

TEST_CASE("restarts: a divergence, an interrupt, a store failure and a time limit are not restarted",
          "[run][restarts]") {
  // The same step would diverge again.
  const auto diverged =
      ended_by(launch::RunStatus::failed, 0, "rank 0 exited with code 65", launch::k_diverged_exit_code, 0);
  CHECK(run::verdict_of(diverged, std::nullopt).status == store::RunStatus::diverged);
  CHECK_FALSE(death_of(diverged).has_value());
  // A rank that checkpointed and exited 130 (asked to stop by a scheduler), or a forwarded Ctrl-C.
  CHECK_FALSE(death_of(ended_by(launch::RunStatus::interrupted, 1, "rank 1 exited with code 130", 130, 0)));
  auto interrupted = ended_by(launch::RunStatus::interrupted, 1, "rank 1 was killed by SIGKILL");
  interrupted.interrupt_signal = SIGINT;
  CHECK_FALSE(death_of(interrupted).has_value());
  // Ctrl-C while the supervisor stopped the ranks after a death: the user's stop wins.
  auto stopped_while_failing = ended_by(launch::RunStatus::failed, 1, "rank 1 was killed by SIGKILL");
  stopped_while_failing.interrupt_signal = SIGTERM;
  CHECK_FALSE(death_of(stopped_while_failing).has_value());
  // Faults outside the ranks name no rank.
  CHECK_FALSE(death_of(ended_by(launch::RunStatus::failed, std::nullopt,
                                "cannot record the run's metrics: disk I/O error: no space left on device")));
  CHECK_FALSE(death_of(ended_by(launch::RunStatus::failed, std::nullopt, "the run timed out after 10 s")));
  CHECK_FALSE(death_of(ended_by(launch::RunStatus::completed, std::nullopt, "")));
}
