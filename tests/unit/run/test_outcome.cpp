// Outcome mapping: launch status and rank exits -> store status, exit code and root cause.
#include <catch2/catch.hpp>

#include "expctl/launch/control_channel.hpp"
#include "expctl/run/outcome.hpp"
#include "expctl/train/records.hpp"

namespace {

using namespace expctl;

launch::Outcome failed_by(int rank, int exit_code, std::vector<std::string> lines = {}) {
  launch::Outcome outcome;
  outcome.status = launch::RunStatus::failed;
  outcome.ranks = {{0, 100, exit_code, 0, false}, {1, 101, 1, 0, true}};
  outcome.ranks[0].rank = rank;
  outcome.root_cause = launch::RootCause{rank, fmt::format("rank {} exited with code {}", rank, exit_code), lines, {}};
  return outcome;
}

}  // namespace

TEST_CASE("outcome: each launch status maps to its store status and exit code", "[run][outcome]") {
  CHECK(run::store_status(launch::RunStatus::completed) == store::RunStatus::completed);
  CHECK(run::store_status(launch::RunStatus::interrupted) == store::RunStatus::interrupted);
  CHECK(run::store_status(launch::RunStatus::failed) == store::RunStatus::failed);
  CHECK(run::exit_code_of(store::RunStatus::completed) == util::ExitCode::ok);
  CHECK(run::exit_code_of(store::RunStatus::interrupted) == util::ExitCode::interrupted);
  CHECK(run::exit_code_of(store::RunStatus::failed) == util::ExitCode::run_failed);
  CHECK(run::exit_code_of(store::RunStatus::diverged) == util::ExitCode::run_failed);
  CHECK(run::rank_status({0, 1, 0, 0, false}) == store::RunStatus::completed);
  CHECK(run::rank_status({0, 1, 130, 0, false}) == store::RunStatus::interrupted);
  CHECK(run::rank_status({0, 1, launch::k_diverged_exit_code, 0, false}) == store::RunStatus::diverged);
  CHECK(run::rank_status({0, 1, -1, 9, false}) == store::RunStatus::failed);
}

TEST_CASE("outcome: a rank that exits 65 makes the run diverged with the step and every rank's loss",
          "[run][outcome]") {
  run::Divergence divergence{37, {{0, std::numeric_limits<double>::quiet_NaN()}, {1, 2.5}}};
  const auto verdict = run::verdict_of(failed_by(0, launch::k_diverged_exit_code), divergence);
  CHECK(verdict.status == store::RunStatus::diverged);
  CHECK(verdict.exit_code == util::ExitCode::run_failed);
  CHECK_THAT(verdict.root_cause, Catch::StartsWith("the loss is not finite at step 37 (rank 0: nan, rank 1: 2.5): "
                                                   "lower optim.lr"));
  const auto plain = run::verdict_of(failed_by(1, 3), std::nullopt);
  CHECK(plain.status == store::RunStatus::failed);
  CHECK(plain.root_cause == "rank 1 exited with code 3");
}

TEST_CASE("outcome: glog and c10d noise stays out of the root cause's last lines", "[run][outcome]") {
  const auto verdict = run::verdict_of(
      failed_by(1, 1,
                {"[rank 1] WARNING: Logging before InitGoogleLogging() is written to STDERR",
                 "[rank 1] W1201 09:12:15.123456 12345 socket.cpp:601] [c10d] The client socket has failed",
                 "[rank 1] [W socket.cpp:601] [c10d] The client socket has failed to connect",
                 "[rank 1] expctl: error: allreduce of bucket 0 failed: Connection closed by peer"}),
      std::nullopt);
  CHECK_THAT(verdict.root_cause, Catch::Contains("allreduce of bucket 0 failed"));
  CHECK_THAT(verdict.root_cause, !Catch::Contains("InitGoogleLogging"));
  CHECK_THAT(verdict.root_cause, !Catch::Contains("socket.cpp"));
  CHECK(run::is_log_noise("I1201 09:12:15.000001 1 file.cc:1] hello"));
  CHECK_FALSE(run::is_log_noise("Iteration 12 done"));
}

TEST_CASE("outcome: a rank that stopped answering is named with every rank's last step", "[run][outcome]") {
  auto outcome = failed_by(1, 1);
  outcome.root_cause->description = "rank 1 stopped answering (no heartbeat for 5 s)";
  const auto verdict = run::verdict_of(outcome, std::nullopt, {{0, 812}, {1, 640}});
  CHECK(verdict.root_cause == "rank 1 stopped answering (no heartbeat for 5 s); last steps: rank 0 at 812, rank 1 at 640");
  const auto other = run::verdict_of(failed_by(1, 3), std::nullopt, {{0, 812}, {1, 640}});
  CHECK(other.root_cause == "rank 1 exited with code 3");
}

TEST_CASE("outcome: a rank that stopped answering is named with where every rank's last heartbeat put it",
          "[run][outcome]") {
  auto outcome = failed_by(1, 1, {"step 640 loss 0.31"});
  outcome.root_cause->description = "rank 1 stopped answering (no heartbeat for 5 s)";
  outcome.root_cause->heartbeats = {{0, "step=641 phase=comm_wait bucket=0"}, {1, "step=641 phase=backward"}};
  const auto verdict = run::verdict_of(outcome, std::nullopt, {{0, 640}, {1, 640}});
  CHECK(verdict.root_cause ==
        "rank 1 stopped answering (no heartbeat for 5 s); last heartbeats: rank 0 at step 641 in comm_wait on bucket "
        "0, rank 1 at step 641 in backward\nlast lines of rank 1:\n  step 640 loss 0.31");
  // A heartbeat from a rank of an older version (no payload) leaves the last steps.
  outcome.root_cause->heartbeats.clear();
  CHECK_THAT(run::verdict_of(outcome, std::nullopt, {{0, 640}}).root_cause,
             Catch::StartsWith("rank 1 stopped answering (no heartbeat for 5 s); last steps: rank 0 at 640"));
}

TEST_CASE("beacon: the heartbeat says the step, the phase and the bucket waited on", "[run][outcome]") {
  train::Beacon beacon;
  CHECK(beacon.where() == "step=0 phase=starting");
  beacon.step = 42;
  beacon.enter(train::Phase::backward);
  beacon.bucket = 3;
  CHECK(beacon.where() == "step=42 phase=backward");  // a bucket only matters while waiting
  beacon.enter(train::Phase::comm_wait);
  CHECK(beacon.where() == "step=42 phase=comm_wait bucket=3");
  const std::string text = "heartbeat " + beacon.where();
  const auto line = launch::parse_control_line(text);  // views into text
  CHECK(line.kind == launch::ControlKind::heartbeat);
  CHECK(line.payload == "step=42 phase=comm_wait bucket=3");
  CHECK(launch::parse_control_line("heartbeat").kind == launch::ControlKind::heartbeat);
  CHECK(launch::parse_control_line("heartbeats").kind == launch::ControlKind::unknown);
}
