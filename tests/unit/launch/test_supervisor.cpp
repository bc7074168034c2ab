#include <algorithm>
#include <csignal>
#include <sstream>
#include <thread>

#include "launch_test_helpers.hpp"
#include <catch2/catch.hpp>

#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/util/error.hpp"

using namespace expctl::launch;
using namespace expctl::launch::test;
using namespace std::chrono_literals;

namespace {

RankSpec shell_rank(int rank, const std::string& script) {
  return {rank, {"sh", "-c", script}, {}};
}

// Console lines collected from the supervisor.
struct Console {
  std::vector<std::string> lines;
  ConsoleSink sink() {
    return [this](std::string_view line) { lines.emplace_back(line); };
  }
};

SupervisorOptions quiet_options(const TempDir& dir, Console& console) {
  SupervisorOptions options;
  options.log_dir = dir.path() / "logs";
  options.console = console.sink();
  options.grace_period = 500ms;
  return options;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

void require_all_gone(const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) {
    INFO("pid " << pid);
    CHECK(process_gone(pid));
  }
}

}  // namespace

TEST_CASE("supervisor: every rank gets the launch contract of the plan", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  LaunchRequest request;
  request.nproc_per_node = 2;
  request.cores = 4;
  request.environment = EnvMap{};
  const LaunchPlan plan = make_launch_plan(request);
  Supervisor supervisor(quiet_options(dir, console));
  const Outcome outcome = supervisor.run(rank_specs(plan, {data_file("print_env.sh")}));
  CHECK(outcome.status == RunStatus::completed);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = read_file(dir.path() / "logs" / fmt::format("rank-{}.log", rank));
    CHECK(log == fmt::format("RANK={0}\nLOCAL_RANK={0}\nWORLD_SIZE=2\nLOCAL_WORLD_SIZE=2\nGROUP_RANK=0\n"
                             "MASTER_ADDR=127.0.0.1\nMASTER_PORT={1}\nOMP_NUM_THREADS=2\nEXPCTL_CONTROL_FD=3\n",
                             rank, plan.master_port));
  }
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: all ranks succeed and logs and console get the right lines", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  Supervisor supervisor(quiet_options(dir, console));
  const Outcome outcome = supervisor.run({shell_rank(0, "echo zero out; echo zero err >&2"),
                                          shell_rank(1, "echo one out; echo one err >&2; printf 'no newline'")});
  CHECK(outcome.status == RunStatus::completed);
  CHECK_FALSE(outcome.root_cause);
  REQUIRE(outcome.ranks.size() == 2);
  CHECK(outcome.ranks[1].exit_code == 0);
  CHECK(describe(outcome.ranks[1]) == "exited normally");
  // Lines keep their order within a stream; stdout and stderr interleave in arrival order.
  CHECK(sorted_lines(read_file(dir.path() / "logs/rank-0.log")) == std::vector<std::string>{"zero err", "zero out"});
  const std::string log1 = read_file(dir.path() / "logs/rank-1.log");
  CHECK(sorted_lines(log1) == std::vector<std::string>{"no newline", "one err", "one out"});
  CHECK(log1.find("one out\n") < log1.find("no newline\n"));
  std::sort(console.lines.begin(), console.lines.end());
  CHECK(console.lines == std::vector<std::string>{"[rank 0] zero err", "[rank 0] zero out", "[rank 1] one err"});
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: a failing rank is the root cause and its sibling is stopped", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  std::vector<RankExit> exits;
  options.on_rank_exit = [&](const RankExit& exit) { exits.push_back(exit); };
  Supervisor supervisor(options);
  const Outcome outcome = supervisor.run(
      {shell_rank(0, "echo training; exec sleep 30"), shell_rank(1, "echo step 1; echo 'loss is nan' >&2; exit 3")});
  CHECK(outcome.status == RunStatus::failed);
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->rank == 1);
  CHECK(outcome.root_cause->description == "rank 1 exited with code 3");
  CHECK(outcome.root_cause->last_lines == std::vector<std::string>{"step 1", "loss is nan"});
  CHECK(outcome.ranks[1].exit_code == 3);
  CHECK(outcome.ranks[0].signal == SIGTERM);
  REQUIRE(exits.size() == 2);
  CHECK(exits[0].rank == 1);  // the failure is reported first, then the rank it brought down
  CHECK(exits[1].rank == 0);
  CHECK(exits[1].signal == SIGTERM);
  CHECK(outcome.ranks[0].stopped_by_supervisor);
  CHECK_FALSE(outcome.ranks[1].stopped_by_supervisor);
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: only the last lines of the root cause are kept", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  options.tail_lines = 3;
  Supervisor supervisor(options);
  const Outcome outcome = supervisor.run({shell_rank(0, "for i in 1 2 3 4 5 6; do echo line $i; done; exit 1")});
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->last_lines == std::vector<std::string>{"line 4", "line 5", "line 6"});
}

TEST_CASE("supervisor: a rank killed by SIGKILL mid-run fails the run", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  Supervisor supervisor(quiet_options(dir, console));
  const std::string pid_file = dir / "victim.pid";
  std::thread killer([&] {
    const std::string pid = wait_for_file(pid_file);
    if (!pid.empty())
      ::kill(std::stoi(pid), SIGKILL);
  });
  const Outcome outcome =
      supervisor.run({shell_rank(0, "exec sleep 30"), shell_rank(1, "echo $$ > " + pid_file + ".tmp; mv " + pid_file +
                                                                        ".tmp " + pid_file + "; exec sleep 30")});
  killer.join();
  CHECK(outcome.status == RunStatus::failed);
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->rank == 1);
  CHECK(outcome.root_cause->description == "rank 1 was killed by SIGKILL");
  CHECK(outcome.ranks[1].signal == SIGKILL);
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: a rank that ignores SIGTERM gets SIGKILL after the grace period", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  Supervisor supervisor(quiet_options(dir, console));
  const std::string ready = dir / "ready";
  const Outcome outcome = supervisor.run({shell_rank(0, "trap '' TERM; touch " + ready + "; exec sleep 30"),
                                          shell_rank(1, "while [ ! -e " + ready + " ]; do sleep 0.01; done; exit 4")});
  CHECK(outcome.status == RunStatus::failed);
  CHECK(outcome.root_cause->description == "rank 1 exited with code 4");
  CHECK(outcome.ranks[0].signal == SIGKILL);
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: a silent rank has stopped answering", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  options.heartbeat_timeout = 1s;
  Supervisor supervisor(options);
  // Rank 0 heartbeats without pause (echo is a shell builtin), so even a loaded machine cannot
  // make it look silent.
  const Outcome outcome = supervisor.run({shell_rank(0, "while true; do echo heartbeat >&$EXPCTL_CONTROL_FD; done"),
                                          shell_rank(1, "echo 'waiting in all_reduce' >&2; exec sleep 30")});
  CHECK(outcome.status == RunStatus::failed);
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->rank == 1);
  CHECK(outcome.root_cause->description == "rank 1 stopped answering (no heartbeat for 1 s)");
  CHECK(outcome.root_cause->last_lines == std::vector<std::string>{"waiting in all_reduce"});
  CHECK(outcome.ranks[0].stopped_by_supervisor);
  CHECK(outcome.ranks[1].stopped_by_supervisor);
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: the whole-run timeout fails the run with no rank to blame", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  options.run_timeout = 300ms;
  Supervisor supervisor(options);
  const Outcome outcome = supervisor.run({shell_rank(0, "exec sleep 30")});
  CHECK(outcome.status == RunStatus::failed);
  REQUIRE(outcome.root_cause);
  CHECK_FALSE(outcome.root_cause->rank);
  CHECK(outcome.root_cause->description == "the run timed out after 0.3 s");
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: control-channel records reach the callback, heartbeats do not", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  std::vector<std::pair<int, std::string>> records;
  options.on_record = [&](int rank, std::string_view record) { records.emplace_back(rank, record); };
  Supervisor supervisor(options);
  const std::string send =
      "echo heartbeat >&3; echo 'record {\"step\":1}' >&3; echo 'progress 1/2' >&3; echo 'record {\"step\":2}' >&3";
  const Outcome outcome = supervisor.run({shell_rank(0, send), shell_rank(1, "echo 'record {\"rank\":1}' >&3")});
  CHECK(outcome.status == RunStatus::completed);
  std::sort(records.begin(), records.end());
  CHECK(records ==
        std::vector<std::pair<int, std::string>>{{0, "{\"step\":1}"}, {0, "{\"step\":2}"}, {1, "{\"rank\":1}"}});
}

TEST_CASE("supervisor: a rank that exits 130 on its own interrupts the run", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  Supervisor supervisor(quiet_options(dir, console));
  const Outcome outcome = supervisor.run({shell_rank(0, "exec sleep 30"), shell_rank(1, "echo preempted; exit 130")});
  CHECK(outcome.status == RunStatus::interrupted);
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->description == "rank 1 exited with code 130");
  CHECK(outcome.ranks[0].signal == SIGTERM);
  require_all_gone(supervisor.pids());
}

TEST_CASE("supervisor: grandchildren a rank leaves behind are killed", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  Supervisor supervisor(quiet_options(dir, console));
  const std::string pid_file = dir / "grandchild.pid";
  const Outcome outcome = supervisor.run({shell_rank(0, "sleep 30 & echo $! > " + pid_file)});
  CHECK(outcome.status == RunStatus::completed);
  const pid_t grandchild = std::stoi(read_file(pid_file));
  CHECK(wait_until_gone(grandchild));
}

TEST_CASE("supervisor: a program that cannot start is named and nothing is left", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  std::vector<pid_t> pids;
  {
    Supervisor supervisor(quiet_options(dir, console));
    CHECK_THROWS_MATCHES(supervisor.start({shell_rank(0, "exec sleep 30"), {1, {"/nonexistent/rank"}, {}}}),
                         expctl::util::LaunchError,
                         Catch::Message("cannot start rank 1: \"/nonexistent/rank\": No such file or directory"));
    pids = supervisor.pids();
    REQUIRE(pids.size() == 1);
    CHECK_FALSE(process_gone(pids[0]));
  }
  require_all_gone(pids);
}

TEST_CASE("supervisor: the destructor kills and reaps running ranks", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  std::vector<pid_t> pids;
  {
    Supervisor supervisor(quiet_options(dir, console));
    supervisor.start({shell_rank(0, "exec sleep 30"), shell_rank(1, "exec sleep 30")});
    pids = supervisor.pids();
  }
  REQUIRE(pids.size() == 2);
  require_all_gone(pids);
}

TEST_CASE("supervisor: held ranks start before the run, get the line on their input, and are supervised",
          "[launch][supervisor]") {
  TempDir dir;
  Console console;
  const auto started = (dir.path() / "started").string();
  // Each rank proves it ran before the line came (the file exists), then prints what it read.
  HeldRanks held({shell_rank(0, "echo x > " + started + "-0; read line; echo \"got $line\""),
                  shell_rank(1, "echo x > " + started + "-1; read line; echo \"got $line\" >&2; exit 0")});
  const auto pids = held.pids();
  REQUIRE(pids.size() == 2);
  wait_for_file(started + "-0");
  wait_for_file(started + "-1");
  CHECK_FALSE(std::filesystem::exists(dir.path() / "logs"));  // no log folder before the run exists
  SupervisorOptions options = quiet_options(dir, console);
  options.heartbeat_timeout = 1s;
  std::this_thread::sleep_for(1200ms);  // longer than the heartbeat timeout: counted from the line
  Supervisor supervisor(options);
  supervisor.start(std::move(held), "/runs/abc");
  CHECK(held.pids().empty());
  CHECK(supervisor.pids() == pids);
  const Outcome outcome = supervisor.wait();
  CHECK(outcome.status == RunStatus::completed);
  CHECK(read_file(dir.path() / "logs/rank-0.log") == "got /runs/abc\n");
  CHECK(read_file(dir.path() / "logs/rank-1.log") == "got /runs/abc\n");
  CHECK(std::find(console.lines.begin(), console.lines.end(), "[rank 1] got /runs/abc") != console.lines.end());
  require_all_gone(pids);
}

TEST_CASE("supervisor: held ranks never given their line are killed and reaped", "[launch][supervisor]") {
  TempDir dir;
  const auto started = (dir.path() / "started").string();
  std::vector<pid_t> pids;
  {
    // A rank that ignores end of input (it would wait forever) is killed all the same.
    HeldRanks held({shell_rank(0, "echo x > " + started + "; exec sleep 30"), shell_rank(1, "read line")});
    pids = held.pids();
    wait_for_file(started);
  }
  REQUIRE(pids.size() == 2);
  require_all_gone(pids);
}

TEST_CASE("supervisor: ranks inherit the given environment plus their own changes", "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  options.environment = EnvMap{{"PATH", "/usr/bin:/bin"}, {"KEEP", "kept"}, {"DROP", "dropped"}};
  Supervisor supervisor(options);
  RankSpec rank = shell_rank(0, "echo KEEP=${KEEP-unset} DROP=${DROP-unset} HOME=${HOME-unset} ADD=${ADD-unset}");
  rank.env = {{"DROP", std::nullopt}, {"ADD", "added"}};
  CHECK(supervisor.run({rank}).status == RunStatus::completed);
  CHECK(read_file(dir.path() / "logs/rank-0.log") == "KEEP=kept DROP=unset HOME=unset ADD=added\n");
}

TEST_CASE("supervisor: signals and rank ends read as words", "[launch][supervisor]") {
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(9999) == "signal 9999");
  CHECK(describe(RankExit{.rank = 2, .exit_code = -1, .signal = SIGABRT}) == "was killed by SIGABRT");
  CHECK(describe(RankExit{.rank = 2, .exit_code = 130}) == "exited with code 130");
  CHECK(to_string(RunStatus::interrupted) == "interrupted");
}

TEST_CASE("supervisor: a program's ranks start in their workdir and every line reaches the callback as it is",
          "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  std::vector<std::string> records;
  options.on_record = [&](int, std::string_view record) { records.emplace_back(record); };
  Supervisor supervisor(options);
  RankSpec rank = shell_rank(0, "echo heartbeat >&3; echo \"{\\\"cwd\\\": \\\"$(pwd)\\\"}\" >&$EXPCTL_METRICS_FD");
  rank.env["EXPCTL_METRICS_FD"] = "3";
  rank.workdir = dir.path();
  rank.protocol = ControlProtocol::lines;
  const Outcome outcome = supervisor.run({rank});
  CHECK(outcome.status == RunStatus::completed);
  CHECK(records == std::vector<std::string>{"heartbeat", "{\"cwd\": \"" + dir.path().string() + "\"}"});
}

TEST_CASE("supervisor: with silence_counts_after_first_line a rank that never spoke is not judged, one that did is",
          "[launch][supervisor]") {
  TempDir dir;
  Console console;
  SupervisorOptions options = quiet_options(dir, console);
  options.heartbeat_timeout = 1s;
  options.silence_counts_after_first_line = true;
  Supervisor supervisor(options);
  // Rank 0 never writes a control line and ends after 2 s: not hung. Rank 1 speaks once, then is silent.
  const Outcome outcome =
      supervisor.run({shell_rank(0, "sleep 2"), shell_rank(1, "echo '{\"step\": 1}' >&3; exec sleep 30")});
  CHECK(outcome.status == RunStatus::failed);
  REQUIRE(outcome.root_cause);
  CHECK(outcome.root_cause->rank == 1);
  CHECK(outcome.root_cause->description == "rank 1 stopped answering (no heartbeat for 1 s)");
}
