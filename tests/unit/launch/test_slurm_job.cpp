#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "expctl/launch/slurm_job.hpp"
#include "expctl/util/error.hpp"

using namespace expctl::launch::slurm;
using namespace std::chrono_literals;

namespace {

std::string recorded(const std::string& name) {
  std::ifstream in(std::string(EXPCTL_SLURM_TEST_DATA) + "/" + name);
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("slurm job: a running job of Slurm 22.05, one line or several, reads alike") {
  const JobInfo one = parse_job(recorded("22.05-running-oneline.txt"));
  const JobInfo many = parse_job(recorded("22.05-running.txt"));
  for (const JobInfo* job : {&one, &many}) {
    CHECK(job->state == JobState::running);
    CHECK(job->reason == "None");
    CHECK(job->restarts == 0);
    CHECK(job->requeue);
    CHECK(job->exit_code == 0);
    CHECK(job->exit_signal == 0);
    CHECK(job->node_list == "localhost");
    CHECK(job->time_limit == 300s);
    CHECK(job->fields.at("JobName") == "expctl-run");
    CHECK(job->fields.at("AllocNode:Sid").starts_with("localhost:"));
    CHECK(job->fields.at("CPUs/Task") == "1");
  }
  CHECK(one.id == many.id);
  CHECK(one.fields == many.fields);
  CHECK(!is_final(one.state));
}

TEST_CASE(
    "slurm job: a requeued job is pending again with its restart counted, a failed one has its exit code, a timed-out "
    "one its limit") {
  const JobInfo requeued = parse_job(recorded("22.05-requeued-pending.txt"));
  CHECK(requeued.state == JobState::pending);
  CHECK(requeued.reason == "BeginTime");  // Slurm 22.05 holds a requeued job for 120 s
  CHECK(requeued.restarts == 1);
  CHECK(!is_final(requeued.state));

  const JobInfo failed = parse_job(recorded("22.05-failed-oneline.txt"));
  CHECK(failed.state == JobState::failed);
  CHECK(failed.reason == "NonZeroExitCode");
  CHECK(failed.exit_code == 3);
  CHECK(is_final(failed.state));
  CHECK(stop_cause(failed, 120s) == StopCause::failed);

  const JobInfo timed_out = parse_job(recorded("22.05-timeout-oneline.txt"));
  CHECK(timed_out.state == JobState::timeout);
  CHECK(timed_out.reason == "TimeLimit");
  CHECK(timed_out.time_limit == 60s);
  CHECK(timed_out.run_time >= 60s);
  CHECK(stop_cause(timed_out, 120s) == StopCause::time_limit);
}

TEST_CASE("slurm job: a newer Slurm's fields and spaced values do not break the parser") {
  const JobInfo job = parse_job(recorded("newer-preempted.txt"));
  CHECK(job.id == "48213");
  CHECK(job.state == JobState::preempted);
  CHECK(job.reason == "Preemption");
  CHECK(job.restarts == 2);
  CHECK(job.node_list == "gpu[07-08]");
  CHECK(job.time_limit == std::chrono::seconds(2 * 86400));
  CHECK(job.run_time == std::chrono::seconds(3600 + 12 * 60 + 40));
  CHECK(job.exit_signal == 15);
  // A value with spaces stays whole and does not swallow the next key.
  CHECK(job.fields.at("Comment") == "expctl run 20261130-080112-ab12cd");
  CHECK(job.fields.at("AdminComment") == "moved by ops");
  CHECK(job.fields.at("StdErr") == "/home/ana/exp/expctl-48213.out");
  CHECK(job.fields.at("ContainerID").empty());
  CHECK(stop_cause(job, 120s) == StopCause::preempted);
}

TEST_CASE("slurm job: states by their first word, an unknown state is unknown and not final") {
  CHECK(parse_state("CANCELLED by 1042") == JobState::cancelled);
  CHECK(parse_state("COMPLETED") == JobState::completed);
  CHECK(parse_state("RUNNING+SIGNALING") == JobState::running);
  CHECK(parse_state("RESV_DEL_HOLD") == JobState::unknown);
  CHECK(!is_final(JobState::unknown));
  CHECK(state_name(JobState::node_fail) == "NODE_FAIL");
  CHECK(state_name(JobState::unknown) == "UNKNOWN");
}

TEST_CASE("slurm job: durations in every form Slurm writes, and none for UNLIMITED") {
  CHECK(parse_duration("00:05:00") == 300s);
  CHECK(parse_duration("05:30") == 330s);
  CHECK(parse_duration("30") == 1800s);
  CHECK(parse_duration("1-00") == 86400s);
  CHECK(parse_duration("1-02:03") == std::chrono::seconds(86400 + 2 * 3600 + 3 * 60));
  CHECK(parse_duration("2-01:02:03") == std::chrono::seconds(2 * 86400 + 3600 + 2 * 60 + 3));
  CHECK(parse_duration("UNLIMITED") == std::nullopt);
  CHECK_THROWS_WITH(parse_duration("soon"), Catch::Contains("\"soon\" is not a Slurm duration"));
  CHECK_THROWS_WITH(parse_duration("1:2:3:4"), Catch::Contains("not a Slurm duration"));
}

TEST_CASE("slurm job: sbatch --parsable gives the id, with or without a cluster name") {
  CHECK(parse_submitted("123\n") == "123");
  CHECK(parse_submitted("4567;expctl-throwaway\n") == "4567");
  CHECK_THROWS_WITH(parse_submitted("sbatch: error: Batch job submission failed\n"),
                    Catch::Contains("printed no job id"));
  CHECK_THROWS_WITH(parse_job("slurm_load_jobs error: Invalid job id specified"), Catch::Contains("no JobId"));
}

TEST_CASE("slurm job: timed out or preempted is decided from the job's times, not from the signal") {
  JobInfo job;
  job.state = JobState::running;
  job.time_limit = 3600s;
  job.run_time = 3600s - 100s;  // the warning of --signal=USR2@120, up to 60 s early
  CHECK(stop_cause(job, 120s) == StopCause::time_limit);
  job.run_time = 1200s;  // the same signal an hour early: a preemption
  CHECK(stop_cause(job, 120s) == StopCause::preempted);
  job.time_limit = std::nullopt;  // UNLIMITED never times out
  job.run_time = 99999s;
  CHECK(stop_cause(job, 120s) == StopCause::preempted);
  job.state = JobState::timeout;
  CHECK(stop_cause(job, 120s) == StopCause::time_limit);
  job.state = JobState::node_fail;
  CHECK(stop_cause(job, 120s) == StopCause::node_failure);
  job.state = JobState::completed;
  CHECK(stop_cause(job, 120s) == StopCause::none);
  // `scontrol requeue` makes the job PENDING before its expctl asks why it was stopped (seen on
  // 22.05): that is a requeue, not a preemption to requeue again.
  job.state = JobState::pending;
  job.run_time = 10s;
  job.time_limit = 3600s;
  CHECK(stop_cause(job, 120s) == StopCause::requeued);
  // While it is torn down a requeued job and a cancelled one both read COMPLETING; only the
  // restart count, raised at once by a requeue, tells them apart.
  job.state = JobState::completing;
  job.restarts = 1;
  CHECK(stop_cause(job, 120s, 0) == StopCause::requeued);
  CHECK(stop_cause(job, 120s, 1) == StopCause::cancelled);
  job.run_time = 3590s;  // torn down at its time limit
  CHECK(stop_cause(job, 120s, 1) == StopCause::time_limit);
  job.state = JobState::cancelled;
  CHECK(stop_cause(job, 120s, 1) == StopCause::cancelled);
}

TEST_CASE("slurm job: an array's task ids, single, ranged, listed, with a concurrency limit") {
  CHECK(parse_task_ids("3") == std::vector<std::size_t>{3});
  CHECK(parse_task_ids("4-7%2") == std::vector<std::size_t>{4, 5, 6, 7});
  CHECK(parse_task_ids("0,2,5-6") == std::vector<std::size_t>{0, 2, 5, 6});
  CHECK_THROWS_WITH(parse_task_ids("N/A"), Catch::Contains("not an array's task ids"));
  CHECK_THROWS_WITH(parse_task_ids("7-4"), Catch::Contains("not an array's task ids"));
}

TEST_CASE(
    "slurm job: a run's batch script asks for one supervisor task per node with its ranks' CPUs, the warning "
    "signal, requeue, and starts the run by id with paths quoted") {
  RunScript script;
  script.run_id = "20261206-120000-abcdef";
  script.job_name = "expctl-tiny";
  script.executable = "/opt/expctl/bin/expctl";
  script.global_options = {"--db", "/shared/it's here/expctl.db"};
  script.output = "/shared/runs/x/logs/slurm-%j.out";
  script.working_dir = "/home/me";
  script.ranks_per_node = 4;
  script.cpus_per_rank = 2;
  script.time_limit = "1:00:00";
  script.partition = "gpu";
  script.signal_lead = std::chrono::seconds(120);
  script.allow_drift = true;
  script.directives = {"--gres=gpu:4"};
  const std::string text = render_run_script(script);
  CHECK(text.starts_with("#!/bin/bash\n"));
  for (const char* line : {"#SBATCH --nodes=1\n", "#SBATCH --ntasks-per-node=1\n", "#SBATCH --cpus-per-task=8\n",
                           "#SBATCH --time=1:00:00\n", "#SBATCH --partition=gpu\n", "#SBATCH --signal=TERM@120\n",
                           "#SBATCH --requeue\n", "#SBATCH --open-mode=append\n",
                           "#SBATCH --output=/shared/runs/x/logs/slurm-%j.out\n", "#SBATCH --gres=gpu:4\n"}) {
    CHECK_THAT(text, Catch::Contains(line));
  }
  CHECK_THAT(text, !Catch::Contains("--account"));
  CHECK_THAT(text, Catch::EndsWith("exec srun --nodes=1 --ntasks-per-node=1 --cpus-per-task=8 --kill-on-bad-exit=1 "
                                   "'/opt/expctl/bin/expctl' '--db' '/shared/it'\\''s here/expctl.db' slurm_job "
                                   "20261206-120000-abcdef --signal-lead 120 --allow-drift\n"));
  // The extra directives come after expctl's own, so a user's --time or --signal wins (sbatch
  // takes the last).
  CHECK(text.find("--gres=gpu:4") > text.find("--requeue"));
  CHECK_THAT(text, !Catch::Contains("EXPCTL_DB"));
  // With a team server: the job checks that sbatch handed EXPCTL_DB over, and stops in one line if not.
  script.needs_team_server = true;
  const std::string team = render_run_script(script);
  CHECK_THAT(team, Catch::Contains("[ -n \"${EXPCTL_DB:-}\" ] || { echo \"expctl: error: EXPCTL_DB") &&
                       Catch::Contains("exit 2; }\n"));
  CHECK(team.find("EXPCTL_DB") < team.find("exec srun"));
}
