// Signals to the supervisor itself: the supervisor runs in a forked child of the test (its
// handlers are process-wide), the test signals that child and checks the ranks' fate.
#include <csignal>

#include "launch_test_helpers.hpp"
#include <catch2/catch.hpp>

#include "expctl/launch/supervisor.hpp"

using namespace expctl::launch;
using namespace expctl::launch::test;
using namespace std::chrono_literals;

namespace {

constexpr int k_child_ok = 0;
constexpr int k_child_wrong_outcome = 1;
constexpr int k_child_exception = 2;

// Runs `ranks` under a supervisor and writes the outcome to `report`; exits k_child_ok when the
// outcome is interrupted by SIGINT with every rank ending as `expected` says.
[[noreturn]] void supervise_in_child(const std::vector<RankSpec>& ranks, const std::string& report,
                                     bool (*expected)(const RankExit&)) {
  int code = k_child_exception;
  try {
    SupervisorOptions options;
    options.console = [](std::string_view) {};
    options.grace_period = 500ms;
    options.interrupt_grace = 10min;  // only the second signal may escalate
    Supervisor supervisor(options);
    const Outcome outcome = supervisor.run(ranks);
    std::string text =
        fmt::format("status={} signal={}", to_string(outcome.status), outcome.interrupt_signal.value_or(0));
    bool ok = outcome.status == RunStatus::interrupted && outcome.interrupt_signal == SIGINT && !outcome.root_cause;
    for (const RankExit& exit : outcome.ranks) {
      text += fmt::format(" rank{}:{}", exit.rank, describe(exit));
      ok = ok && expected(exit);
    }
    std::ofstream(report) << text;
    code = ok ? k_child_ok : k_child_wrong_outcome;
  } catch (const std::exception& error) {
    std::ofstream(report) << error.what();
  }
  std::_Exit(code);
}

pid_t read_pid(const std::string& path) {
  const std::string text = wait_for_file(path);
  REQUIRE_FALSE(text.empty());
  return std::stoi(text);
}

RankSpec obedient_rank(int rank, const TempDir& dir) {
  return {rank, {data_file("obedient_rank.sh"), dir.path().string()}, {{"RANK", std::to_string(rank)}}};
}

}  // namespace

TEST_CASE("supervisor: SIGINT reaches the ranks as SIGTERM and they checkpoint and the run is interrupted", "[launch][signals]") {
  TempDir dir;
  const std::vector<RankSpec> ranks = {obedient_rank(0, dir), obedient_rank(1, dir)};
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    supervise_in_child(ranks, dir / "report", [](const RankExit& e) { return e.exit_code == 130; });
  }
  ForkedChild child(pid);
  const pid_t rank0 = read_pid(dir / "pid-0");
  const pid_t rank1 = read_pid(dir / "pid-1");
  ::kill(child.pid(), SIGINT);
  const int code = child.wait();
  INFO(read_file(dir.path() / "report"));
  CHECK(code == k_child_ok);
  CHECK(read_file(dir.path() / "term-0") == "checkpoint\n");
  CHECK(read_file(dir.path() / "term-1") == "checkpoint\n");
  CHECK(wait_until_gone(rank0));
  CHECK(wait_until_gone(rank1));
}

TEST_CASE("supervisor: a second SIGINT escalates to SIGKILL", "[launch][signals]") {
  TempDir dir;
  // A rank that notes each SIGTERM and carries on (its sleeps die, the shell's loop survives).
  const std::string d = dir.path().string();
  const std::string stubborn = "trap 'echo term >> " + d + "/term-$RANK' TERM; echo $$ > " + d + "/pid-$RANK.tmp; mv " +
                               d + "/pid-$RANK.tmp " + d + "/pid-$RANK; while true; do sleep 0.05; done";
  const std::vector<RankSpec> ranks = {{0, {"sh", "-c", stubborn}, {{"RANK", "0"}}},
                                       {1, {"sh", "-c", stubborn}, {{"RANK", "1"}}}};
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    supervise_in_child(ranks, dir / "report", [](const RankExit& e) { return e.signal == SIGKILL; });
  }
  ForkedChild child(pid);
  const pid_t rank0 = read_pid(dir / "pid-0");
  const pid_t rank1 = read_pid(dir / "pid-1");
  ::kill(child.pid(), SIGINT);
  CHECK_FALSE(wait_for_file(dir / "term-0").empty());
  CHECK_FALSE(wait_for_file(dir / "term-1").empty());
  ::kill(child.pid(), SIGINT);
  const int code = child.wait();
  INFO(read_file(dir.path() / "report"));
  CHECK(code == k_child_ok);
  CHECK(wait_until_gone(rank0));
  CHECK(wait_until_gone(rank1));
}

TEST_CASE("supervisor: ranks die with a supervisor that is SIGKILLed", "[launch][signals]") {
  TempDir dir;
  // Silent sleepers: a rank that writes would also die of SIGPIPE, hiding a missing death signal.
  const std::string sleeper = "echo $$ > " + dir.path().string() + "/pid-$RANK.tmp; mv " + dir.path().string() +
                              "/pid-$RANK.tmp " + dir.path().string() + "/pid-$RANK; exec sleep 30";
  const std::vector<RankSpec> ranks = {{0, {"sh", "-c", sleeper}, {{"RANK", "0"}}},
                                       {1, {"sh", "-c", sleeper}, {{"RANK", "1"}}}};
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    supervise_in_child(ranks, dir / "report", [](const RankExit&) { return true; });
  }
  ForkedChild child(pid);
  const pid_t rank0 = read_pid(dir / "pid-0");
  const pid_t rank1 = read_pid(dir / "pid-1");
  ::kill(child.pid(), SIGKILL);
  CHECK(child.wait() == -SIGKILL);
  CHECK(wait_until_gone(rank0));
  CHECK(wait_until_gone(rank1));
}
