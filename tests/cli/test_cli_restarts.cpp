// distributed.max_restarts (docs/run.md, "Restarts"): a rank killed with SIGKILL restarts every
// rank from the newest checkpoint step they all hold (from step 0 before the first), under the
// same run id, each start an invocation with its cause; the restarts used up, the next death
// fails the run naming them. The real binary runs real ranks; nothing is killed by name.
#include <set>

#include "cli/run_helpers.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

/// A 2-rank run of the tiny spec long enough to be killed mid-way: no evaluation, a checkpoint
/// every `checkpoint_every` steps (0: none), `max_restarts` restarts.
std::vector<std::string> restart_run(int max_steps, int checkpoint_every, int max_restarts) {
  return {"run",   tiny_spec(),
          "--set", "train.max_steps=" + std::to_string(max_steps),
          "--set", "train.eval_every=0",
          "--set", "train.checkpoint_every=" + std::to_string(checkpoint_every),
          "--set", "distributed.max_restarts=" + std::to_string(max_restarts)};
}

std::string status_of(const RunDir& d, const std::string& id) {
  try {
    return std::string(store::to_string(d.open().find_run(id).status));
  } catch (const util::Failure&) {
    return "unreadable";  // the writer holds the store this instant: read again
  }
}

/// Waits for `expctl` to end, reading the run's status meanwhile: every status it showed.
std::set<std::string> statuses_until_exit(const RunDir& d, const std::string& id, Background& expctl, int& code) {
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120 * test::timeout_scale());
  while ((code = expctl.wait(std::chrono::seconds(0))) < 0 && std::chrono::steady_clock::now() < deadline) {
    if (const auto status = status_of(d, id); status != "unreadable") {
      seen.insert(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seen;
}

/// The rank-1 process of the run's next start, once it wrote its pid (it differs from `killed`).
pid_t restarted_rank1(const store::RunRecord& run, pid_t killed) {
  pid_t next = killed;
  REQUIRE(eventually([&] {
    try {
      next = rank_pid(run, 1);
    } catch (const std::exception&) {  // the file is being written
    }
    return next != killed && !process_gone(next);
  }));
  return next;
}

json summary_of(const RunDir& d, const std::string& id) {
  return json::parse(d.open().find_run(id).summary_json);
}

/// Kills rank 1 of a max_restarts 1 run (once every rank holds a checkpoint, or at its first
/// step when the run writes none), and checks that the run completes as one restart of its
/// ranks. Returns the restarted run's loss-curve hash, and its cause in `cause`.
std::string killed_and_restarted(const RunDir& d, const std::vector<std::string>& args, bool after_checkpoint,
                                 std::string& cause) {
  Background expctl(d.argv(args), d.dir / (after_checkpoint ? "after-checkpoint" : "before-checkpoint"));
  const auto run = start_training(d);
  std::int64_t held = 0;
  if (after_checkpoint) {
    std::vector<std::int64_t> steps;
    REQUIRE(eventually([&] { return !(steps = steps_held_by_all(run.run_dir / "checkpoints", 2)).empty(); }));
    held = steps.front();
  }
  REQUIRE(::kill(rank_pid(run, 1), SIGKILL) == 0);
  int code = -1;
  auto seen = statuses_until_exit(d, run.id, expctl, code);
  INFO(expctl.out() << expctl.err());
  REQUIRE(code == 0);
  // The run read running throughout, while its ranks were stopped and started again too (and
  // completed once it ended, before `expctl` exited).
  seen.erase("completed");
  CHECK(seen == std::set<std::string>{"running"});
  const auto finished = d.open().find_run(run.id);
  CHECK(finished.status == store::RunStatus::completed);
  CHECK(finished.root_cause.empty());
  const json summary = summary_of(d, run.id);
  CHECK(summary.at("invocations") == 2);
  CHECK(summary.at("steps") == std::stoll(args[3].substr(args[3].find('=') + 1)));
  REQUIRE(summary.at("invocation_causes").size() == 1);
  cause = summary.at("invocation_causes").at("2").get<std::string>();
  CHECK_THAT(cause, Catch::StartsWith("restart 1 of 1: rank 1 was killed by SIGKILL after step "));
  if (after_checkpoint) {
    const std::string resumed = "; resumed from its checkpoint at step ";
    REQUIRE(cause.find(resumed) != std::string::npos);
    CHECK(std::stoll(cause.substr(cause.find(resumed) + resumed.size())) >= held);
  } else {
    CHECK_THAT(cause, Catch::EndsWith("; restarted from step 0 (no checkpoint is held by every rank yet)"));
  }
  // One line on the terminal says the restart and why.
  CHECK_THAT(expctl.err(), Catch::Contains("run " + run.id + " restarted (" + cause + "): 2 rank(s) on this node"));
  for (const auto& rank : d.open().ranks(run.id)) {
    CHECK(rank.status == store::RunStatus::completed);
  }
  return summary.at("loss_curve_sha256").get<std::string>();
}

}  // namespace

// One reference run serves both kills: a restart continues bit for bit whether it resumed from a
// checkpoint or started over at step 0, and the restart count is not hashed.
TEST_CASE(
    "restarts: a rank SIGKILLed after a checkpoint or before any restarts every rank and the run completes with "
    "the uninterrupted loss curve") {
  constexpr int k_steps = 1500;
  std::string reference_sha;
  std::string reference_hash;
  {
    RunDir d;
    const auto reference = d.expctl(restart_run(k_steps, 0, 0));
    INFO(reference.out << reference.err);
    REQUIRE(reference.exit_code == 0);
    const auto run = d.only_run();
    REQUIRE(run.has_value());
    reference_sha = summary_of(d, run->id).at("loss_curve_sha256").get<std::string>();
    reference_hash = run->spec_hash;
  }
  {
    RunDir d;
    std::string cause;
    CHECK(killed_and_restarted(d, restart_run(k_steps, 50, 1), true, cause) == reference_sha);
    CHECK(d.only_run()->spec_hash == reference_hash);
    const auto shown = d.expctl({"show", d.only_run()->id});
    INFO(shown.out << shown.err);
    CHECK_THAT(shown.out, Catch::Contains("invocation_causes.2") && Catch::Contains(cause));
  }
  {
    RunDir d;
    std::string cause;
    CHECK(killed_and_restarted(d, restart_run(k_steps, 0, 1), false, cause) == reference_sha);
  }
}

TEST_CASE("restarts: a second death after max_restarts 1 fails the run naming the death and the restart used") {
  RunDir d;
  Background expctl(d.argv(restart_run(1000000, 0, 1)), d.dir / "killed-twice");
  const auto run = start_training(d);
  const pid_t first = rank_pid(run, 1);
  REQUIRE(::kill(first, SIGKILL) == 0);
  REQUIRE(::kill(restarted_rank1(run, first), SIGKILL) == 0);
  const int code = expctl.wait();
  INFO(expctl.out() << expctl.err());
  CHECK(code == 1);
  const auto finished = d.open().find_run(run.id);
  CHECK(finished.status == store::RunStatus::failed);
  CHECK_THAT(finished.root_cause,
             Catch::StartsWith("rank 1 was killed by SIGKILL") &&
                 Catch::Contains("; not restarted again: 1 restart of 1 (distributed.max_restarts) used"));
  const json summary = summary_of(d, run.id);
  CHECK(summary.at("invocations") == 2);
  CHECK_THAT(summary.at("invocation_causes").at("2").get<std::string>(),
             Catch::StartsWith("restart 1 of 1: rank 1 was killed by SIGKILL"));
  CHECK_THAT(expctl.err(), Catch::Contains("restarted (restart 1 of 1: "));
}

TEST_CASE("restarts: max_restarts with several nodes is refused at validation naming Slurm's requeue") {
  RunDir d;
  const auto refused = d.expctl({"run", tiny_spec(), "--nnodes", "2", "--set", "distributed.max_restarts=1"});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("distributed.max_restarts (1) restarts the ranks of one node") &&
                              Catch::Contains("Slurm requeue"));
  CHECK_FALSE(fs::exists(d.db));
}
