#pragma once
/// Multi-rank tests without fork hazards: each rank is a fresh exec of this test executable that
/// runs the hidden Catch2 case "train rank worker", which calls a registered scenario with the
/// rank's environment. The parent waits with a deadline and kills leftovers by PID.

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace expctl::test {

/// What a scenario function receives in its rank process.
struct RankEnv {
  int rank = 0;
  int world_size = 1;
  unsigned master_port = 0;
  std::filesystem::path dir;  ///< shared folder for results (files named by the scenario)
  /// The group's rendezvous: a file store in the test's own folder, as single-node runs use.
  /// A TCP port picked free by one test process can be picked by another one running beside
  /// it (ctest -j) before its rank 0 binds it, and the two tests' ranks then meet each other.
  std::filesystem::path rendezvous_file() const { return dir / ("rendezvous-" + std::to_string(master_port)); }
};

/// Result of one rank process.
struct RankOutcome {
  int exit_code = -1;      ///< exit status, or -1 if killed or timed out
  bool timed_out = false;  ///< killed by the parent after the deadline
  std::string log;         ///< its stdout and stderr
};

/// A scenario body; throw or fail a Catch2 assertion to make the rank exit non-zero.
using RankScenario = std::function<void(const RankEnv&)>;

/// Registers `scenario` under `name` (use EXPCTL_RANK_SCENARIO at namespace scope).
bool register_rank_scenario(const std::string& name, RankScenario scenario);

/// Runs `world_size` ranks of `scenario` with a free port; returns one outcome per rank.
std::vector<RankOutcome> run_ranks(const std::string& scenario, int world_size, const std::filesystem::path& dir,
                                   std::chrono::seconds deadline = std::chrono::seconds(120));

/// All outcomes' logs, for a failure message.
std::string describe(const std::vector<RankOutcome>& outcomes);

/// run_ranks, then REQUIRE that every rank exited 0 (their logs are the failure message).
void run_ranks_successfully(const std::string& scenario, int world_size, const std::filesystem::path& dir);

}  // namespace expctl::test

#define EXPCTL_RANK_SCENARIO_CAT2(a, b) a##b
#define EXPCTL_RANK_SCENARIO_CAT(a, b) EXPCTL_RANK_SCENARIO_CAT2(a, b)
/// Defines and registers a scenario: EXPCTL_RANK_SCENARIO("name") { ... uses `env` ... }
#define EXPCTL_RANK_SCENARIO(name)                                                                     \
  static void EXPCTL_RANK_SCENARIO_CAT(rank_scenario_, __LINE__)(const ::expctl::test::RankEnv& env); \
  static const bool EXPCTL_RANK_SCENARIO_CAT(rank_scenario_registered_, __LINE__) =                   \
      ::expctl::test::register_rank_scenario(name, &EXPCTL_RANK_SCENARIO_CAT(rank_scenario_, __LINE__)); \
  static void EXPCTL_RANK_SCENARIO_CAT(rank_scenario_, __LINE__)(const ::expctl::test::RankEnv& env)
