// expctl under a real Slurm (Debian 12's 22.05, a throwaway single-node cluster): the batch script
// of examples/slurm/expctl.sbatch, one srun task per rank, each task `expctl run` as that rank.

#include <fstream>

#include "run_helpers.hpp"
#include "slurm_cluster.hpp"

#include "expctl/launch/slurm_job.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

// A batch script of `ntasks` srun tasks, each running expctl with `expctl_args` against `d`'s store.
fs::path batch_script(const RunDir& d, int ntasks, const std::vector<std::string>& expctl_args) {
  const fs::path file = d.dir / "job.sbatch";
  std::ofstream out(file);
  out << "#!/bin/bash\n"
      << "#SBATCH --ntasks=" << ntasks << "\n#SBATCH --cpus-per-task=1\n"
      << "#SBATCH --output=" << (d.dir / "job-%j.out").string() << "\n"
      << "#SBATCH --chdir=" << d.dir.path().string() << "\n"
      << "export MASTER_PORT=" << closed_port() << " OMP_NUM_THREADS=1\n"
      << "srun --kill-on-bad-exit=1 " << test::expctl_binary() << " --db " << d.db.string();
  for (const std::string& arg : expctl_args) {
    out << " '" << arg << "'";
  }
  out << "\n";
  return file;
}

std::string job_output(const RunDir& d, const std::string& job) {
  return read_text(d.dir / ("job-" + job + ".out"));
}

}  // namespace

TEST_CASE("slurm: a 2-rank run through sbatch and srun completes with a local run's loss curve", "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  // 30 steps: past the 20 after which the ranks gather their pace for train.checkpoint_every_s.
  const std::vector<std::string> run{
      "run", tiny_spec(), "--set", "train.max_steps=30", "--set", "distributed.timeout_s=30"};
  const std::string job = slurm.submit(batch_script(d, 2, run));
  const std::string state = slurm.wait_for(job);
  INFO(job_output(d, job));
  REQUIRE(state == "COMPLETED");

  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 1);  // rank 1 recorded nothing itself: rank 0 holds both ranks' steps
  CHECK(runs[0].status == store::RunStatus::completed);
  CHECK(std::find(runs[0].tags.begin(), runs[0].tags.end(), "launcher:slurm") != runs[0].tags.end());
  CHECK(d.open().metrics(runs[0].id, {.name = "loss", .rank = 0}).size() == 30);
  CHECK(d.open().metrics(runs[0].id, {.name = "loss", .rank = 1}).size() == 30);
  const json shown = parse_stdout(d.expctl({"show", runs[0].id, "--format", "json"}));

  RunDir local;
  std::vector<std::string> local_run = run;
  local_run.insert(local_run.end(), {"--format", "json"});
  const auto here = local.expctl(local_run);
  REQUIRE(here.exit_code == 0);
  CHECK(sha_of(shown) == sha_of(parse_stdout(here)));
}

TEST_CASE("slurm: a rank that fails under srun fails the job and the run, naming the rank", "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const fs::path script = d.dir / "job.sbatch";
  {
    std::ofstream out(script);
    out << "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=1\n"
        << "#SBATCH --output=" << (d.dir / "job-%j.out").string() << "\n"
        << "export MASTER_PORT=" << closed_port()
        << " OMP_NUM_THREADS=1\n"
        // Task 1 trains for a moment, then dies by SIGKILL, as an OOM-killed rank does.
        << "srun --kill-on-bad-exit=1 bash -c 'if [ \"$SLURM_PROCID\" = 1 ]; then (sleep 4; kill -9 $$) & fi; exec "
        << test::expctl_binary() << " --db " << d.db.string() << " run " << tiny_spec()
        << " --set train.max_steps=100000 --set distributed.timeout_s=30'\n";
  }
  const std::string job = slurm.submit(script);
  const std::string state = slurm.wait_for(job);
  INFO(job_output(d, job));
  CHECK(state == "FAILED");
  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 1);
  // Rank 0 learns of its peer's death in the next collective, before srun's --kill-on-bad-exit
  // stops it, and records the run failed with that cause (not left `running`, not `completed`).
  CHECK(runs[0].status == store::RunStatus::failed);
  CHECK_THAT(runs[0].root_cause, Catch::Contains("rank 1"));
  CHECK(runs[0].exit_code == 1);
}

TEST_CASE("slurm: the client submits, follows, signals and cancels a job of a real slurmctld", "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  namespace slurm_job = launch::slurm;
  const slurm_job::Client client({{"SLURM_CONF", slurm.conf()}});
  test::TempDir dir;
  const fs::path script = dir / "job.sbatch";
  const fs::path signalled = dir / "signalled";
  {
    std::ofstream out(script);
    out << "#!/bin/bash\n#SBATCH --time=5\n#SBATCH --requeue\n#SBATCH --output=/dev/null\n"
        << "trap 'touch " << signalled.string() << "' USR2\n"
        << "for i in $(seq 600); do sleep 0.1; done\n";
  }
  const std::string job = client.submit(script, {"--job-name=expctl-client-test"});
  std::optional<slurm_job::JobInfo> info;
  REQUIRE(eventually([&] { return (info = client.query(job)) && info->state == slurm_job::JobState::running; }));
  CHECK(info->id == job);
  CHECK(info->fields.at("JobName") == "expctl-client-test");
  CHECK(info->requeue);
  CHECK(info->time_limit == std::chrono::seconds(300));
  CHECK(info->node_list == "localhost");

  client.cancel(job, "USR2");  // the batch shell only, as a preemption warning would reach it
  CHECK(eventually([&] { return fs::exists(signalled); }));
  CHECK(client.query(job)->state == slurm_job::JobState::running);  // a signal is not a cancel

  client.cancel(job);
  REQUIRE(eventually([&] { return slurm_job::is_final(client.query(job)->state); }));
  CHECK(client.query(job)->state == slurm_job::JobState::cancelled);
  CHECK(slurm_job::stop_cause(*client.query(job), std::chrono::seconds(120)) == slurm_job::StopCause::cancelled);

  CHECK(client.query("999999") == std::nullopt);  // a job Slurm does not know
  CHECK_THROWS_WITH(client.submit(script, {"--partition=nosuch"}),
                    Catch::StartsWith("slurm: sbatch failed (exit 1): sbatch: error:") && Catch::Contains("partition"));
}
