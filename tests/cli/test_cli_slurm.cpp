// expctl under a real Slurm (Debian 12's 22.05, a throwaway single-node cluster): the batch script
// of examples/slurm/expctl.sbatch, one srun task per rank, each task `expctl run` as that rank.

#include <fstream>
#include <set>

#include "run_helpers.hpp"
#include "slurm_cluster.hpp"
#include "unit/store/backend_fixture.hpp"
#include <nlohmann/json.hpp>

#include "expctl/launch/slurm_job.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

// A batch script of `ntasks` srun tasks, each running expctl with `expctl_args` against `d`'s store;
// with `nodes` > 1, one task per node (rank 0 on the first, its address this machine's loopback).
fs::path batch_script(const RunDir& d, int ntasks, const std::vector<std::string>& expctl_args, int nodes = 1) {
  const fs::path file = d.dir / "job.sbatch";
  std::ofstream out(file);
  out << "#!/bin/bash\n"
      << "#SBATCH --ntasks=" << ntasks << "\n#SBATCH --cpus-per-task=1\n"
      << (nodes > 1 ? "#SBATCH --nodes=" + std::to_string(nodes) + "\n#SBATCH --ntasks-per-node=1\n" : "")
      << "#SBATCH --output=" << (d.dir / "job-%j.out").string() << "\n"
      << "#SBATCH --chdir=" << d.dir.path().string() << "\n"
      << (nodes > 1 ? "export MASTER_ADDR=127.0.0.1\n" : "") << "export MASTER_PORT=" << closed_port()
      << " OMP_NUM_THREADS=1\n"
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

TEST_CASE("slurm: a 2-rank run of two Slurm nodes, one srun task each, records both ranks with a local run's curve",
          "[slurm]") {
  test::cli::ThrowawaySlurm slurm(2);  // nodes n1 and n2, each its own slurmd
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const std::vector<std::string> run{
      "run", tiny_spec(), "--set", "train.max_steps=30", "--set", "distributed.timeout_s=30"};
  const std::string job = slurm.submit(batch_script(d, 2, run, /*nodes=*/2));
  const std::string state = slurm.wait_for(job);
  INFO(job_output(d, job));
  REQUIRE(state == "COMPLETED");
  const auto info = slurm.jobs().query(job);
  REQUIRE(info.has_value());
  CHECK(info->fields.at("NodeList") == "n[1-2]");  // the job really held two nodes

  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].status == store::RunStatus::completed);
  CHECK(d.open().metrics(runs[0].id, {.name = "loss", .rank = 1}).size() == 30);
  const json shown = parse_stdout(d.expctl({"show", runs[0].id, "--format", "json"}));
  // Rank 0 ran on n1 as the first of 2 nodes: its fingerprint keeps Slurm's word for it.
  const std::string fingerprint = shown.dump();
  CHECK_THAT(fingerprint, Catch::Contains("\"SLURMD_NODENAME\":\"n1\"") || Catch::Contains("\"SLURM_NODEID\":\"0\""));
  CHECK_THAT(fingerprint,
             Catch::Contains("\"SLURM_JOB_NUM_NODES\":\"2\"") || Catch::Contains("\"SLURM_NNODES\":\"2\""));

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
        // Task 1 trains for a moment, then dies by SIGKILL, as an OOM-killed rank does. Without
        // --kill-on-bad-exit, so that rank 0 finds the death itself; with it, srun's SIGTERM may
        // reach rank 0 first and the run reads `interrupted` (docs/launch.md).
        << "srun --kill-on-bad-exit=0 bash -c 'if [ \"$SLURM_PROCID\" = 1 ]; then (sleep 4; kill -9 $$) & fi; exec "
        << test::expctl_binary() << " --db " << d.db.string() << " run " << tiny_spec()
        << " --set train.max_steps=100000 --set distributed.timeout_s=30'\n";
  }
  const std::string job = slurm.submit(script);
  const std::string state = slurm.wait_for(job);
  INFO(job_output(d, job));
  CHECK(state == "FAILED");
  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 1);
  // Rank 0 learns of its peer's death in the next collective and records the run failed with that
  // cause (not left `running`, not `completed`).
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
  const slurm_job::Client client = slurm.jobs();
  test::TempDir dir;
  const fs::path script = dir / "job.sbatch";
  const fs::path signalled = dir / "signalled";
  const fs::path started = dir / "started";  // the trap is set: Slurm says RUNNING a moment before
  {
    std::ofstream out(script);
    out << "#!/bin/bash\n#SBATCH --time=5\n#SBATCH --requeue\n#SBATCH --output=/dev/null\n"
        << "trap 'touch " << signalled.string() << "' USR2\n"
        << "touch " << started.string() << "\n"
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

  REQUIRE(eventually([&] { return fs::exists(started); }));
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

namespace {

// An 8-point sweep (4 learning rates x 2 seeds) of 20-step tiny runs; `extra` is appended.
// A sweep file over the tiny spec: `name`, the `set:` mapping's entries, and the rest (grid, seeds).
fs::path sweep_file(const RunDir& d, const std::string& name, const std::string& set, const std::string& rest) {
  const fs::path file = d.dir / "sweep.yaml";
  std::ofstream(file) << "name: " << name << "\nbase: " << tiny_spec() << "\nset: {" << set << "}\n" << rest;
  return file;
}

fs::path tiny_sweep(const RunDir& d, const std::string& extra = "") {
  return sweep_file(d, "tiny8", "train.max_steps: 20, train.eval_every: 0",
                    "grid:\n  optim.lr: [0.01, 0.02, 0.05, 0.1]\nseeds: [1, 2]\n" + extra);
}

}  // namespace

TEST_CASE(
    "slurm: an 8-point sweep runs as one job array, merged into the store, and only what is not done is "
    "submitted again",
    "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const fs::path file = tiny_sweep(d);
  const std::map<std::string, std::optional<std::string>> env{{"SLURM_CONF", slurm.conf()}};
  const auto first = test::run_expctl({"--db", d.db.string(), "sweep", file.string(), "--slurm", "--wait"}, env);
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("8 point(s) submitted as Slurm array job"));
  CHECK_THAT(first.out, Catch::Contains("(tasks 0-7)"));
  CHECK_THAT(first.out, Catch::Contains("8 of 8 task(s) completed; 8 run(s) merged"));
  CHECK_THAT(first.err, Catch::Contains("8 completed"));

  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 8);
  std::set<std::string> points;
  std::set<std::string> jobs;
  for (const auto& run : runs) {
    CHECK(run.status == store::RunStatus::completed);
    for (const std::string& tag : run.tags) {
      if (tag.starts_with("sweep-point:")) {
        points.insert(tag);
      } else if (tag.starts_with("slurm-job:")) {
        jobs.insert(tag);  // each run says which array task made it
      }
    }
  }
  CHECK(points.size() == 8);
  CHECK(jobs.size() == 8);

  // Everything is done: nothing is submitted (sbatch is not even called).
  const auto again = test::run_expctl({"--db", d.db.string(), "sweep", file.string(), "--slurm", "--wait"}, env);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("nothing to submit"));
  CHECK(d.open().list_runs().size() == 8);
}

TEST_CASE("slurm: a sweep array whose task fails exits 1 naming the task, and merges the runs that completed",
          "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  // Point 1's learning rate makes the loss non-finite (as in the faults test of a diverging loss):
  // that run diverges and its task fails.
  const fs::path file = sweep_file(d, "two", "train.max_steps: 100, train.eval_every: 0, optim.momentum: 0.99",
                                   "grid:\n  optim.lr: [0.05, 10]\n");
  const auto result = test::run_expctl({"--db", d.db.string(), "sweep", file.string(), "--slurm", "--wait"},
                                       {{"SLURM_CONF", slurm.conf()}});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::Contains("array task 1 (point 1) ended FAILED, exit 1; its output: "));
  // The task's output is where the line says, beside the tasks' stores, not in the working directory.
  const std::string err = result.err;
  const auto named = err.substr(err.find("its output: ") + 12);
  const fs::path output = named.substr(0, named.find('\n'));
  CHECK(output.parent_path() == d.db.parent_path() / "sweep-two");
  CHECK_THAT(read_text(output), Catch::Contains("the loss is not finite"));
  CHECK_THAT(result.out, Catch::Contains("1 of 2 task(s) completed; 2 run(s) merged"));
  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 2);
  std::multiset<store::RunStatus> statuses;
  for (const auto& run : runs) {
    statuses.insert(run.status);
  }
  CHECK(statuses == std::multiset<store::RunStatus>{store::RunStatus::completed, store::RunStatus::diverged});
}

TEST_CASE(
    "slurm: a submitted array's points show queued, running and ended in sweep --dry-run and --report, and are not "
    "submitted twice",
    "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  // Long points, one task at a time: point 0 runs while 1 and 2 wait in the queue.
  const fs::path file =
      sweep_file(d, "held", "train.max_steps: 1000000, train.eval_every: 0", "grid:\n  optim.lr: [0.01, 0.02, 0.05]\n");
  const std::map<std::string, std::optional<std::string>> env{{"SLURM_CONF", slurm.conf()}};
  const auto sweep = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", d.db.string(), "sweep", file.string()});
    return test::run_expctl(args, env);
  };
  const auto submitted = sweep({"--slurm", "--array-limit", "1"});
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const std::string out = submitted.out;
  const std::string job = out.substr(out.find("array job ") + 10, out.find(" (tasks") - out.find("array job ") - 10);
  const launch::slurm::Client client({{"SLURM_CONF", slurm.conf()}});
  struct Cancel {
    const launch::slurm::Client& client;
    std::string job;
    ~Cancel() {
      try {
        client.cancel(job);
      } catch (const util::Failure&) {
      }
    }
  } cancel_at_end{client, job};

  // The plan counts the array's points as taken and names each one's state.
  nlohmann::json plan;
  REQUIRE(eventually([&] {
    const auto dry = sweep({"--dry-run", "--format", "json"});
    plan = nlohmann::json::parse(dry.out);
    for (const auto& point : plan["array"]) {
      if (point["point"] == 0 && point["state"] == "running" && !point["step"].is_null()) {
        return true;
      }
    }
    return false;
  }));
  INFO(plan.dump(2));
  CHECK(plan["jobs"].empty());
  CHECK(plan["in_array_runs"] == 3);
  REQUIRE(plan["array"].size() == 3);
  for (const int point : {1, 2}) {
    CHECK(plan["array"][point]["job"] == job);
    CHECK(plan["array"][point]["state"] == "queued");
    CHECK(plan["array"][point]["slurm_state"] == "PENDING");
  }
  const auto dry = sweep({"--dry-run"});
  CHECK_THAT(dry.err, Catch::Contains("0 done, 0 to run, 3 held by a submitted Slurm array"));
  CHECK_THAT(dry.out, Catch::Contains("array " + job + ": queued points 1, 2; running point 0 (step "));

  // Submitting again submits nothing: the array holds every point.
  const auto again = sweep({"--slurm"});
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("nothing to submit") && Catch::Contains("held by a submitted Slurm array"));

  const auto report = sweep({"--report"});
  CHECK(report.exit_code == 0);
  CHECK_THAT(report.out, Catch::Contains("array " + job + ": queued points 1, 2; running point 0"));
  CHECK_THAT(report.out, !Catch::Contains("no completed run yet"));

  // Cancelled, the array holds nothing any more: the queued tasks ended without a run, point 0's
  // run was interrupted (it reads lost while Slurm has ended the task and expctl is still
  // recording), and the next sweep plans all three again.
  client.cancel(job);
  REQUIRE(eventually([&] {
    plan = nlohmann::json::parse(sweep({"--dry-run", "--format", "json"}).out);
    return plan["jobs"].size() == 3 && plan["array"][0]["state"] != "lost";
  }));
  CHECK(plan["in_array_runs"] == 0);
  CHECK(plan["array"][1]["state"] == "ended");
  CHECK(plan["array"][0]["state"] == "interrupted");
}

TEST_CASE("slurm: with a team server as --db, sweep --slurm --wait merges the array's runs into the server",
          "[slurm][postgres]") {
  test::cli::ThrowawaySlurm slurm;
  test::BackendStore server(store::StoreKind::postgresql);
  if (!slurm.available() || !server.available) {
    return;
  }
  RunDir d;
  const fs::path file =
      sweep_file(d, "team", "train.max_steps: 20, train.eval_every: 0", "grid:\n  optim.lr: [0.01, 0.02]\n");
  server.open();  // the team's server holds an expctl store (a fresh one is refused: `expctl sync` makes it)
  const auto result = test::run_expctl(
      {"--db", server.location, "--local-db", d.db.string(), "sweep", file.string(), "--slurm", "--wait"},
      {{"SLURM_CONF", slurm.conf()}});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("2 of 2 task(s) completed; 2 run(s) merged into postgresql"));
  const auto runs = server.open().list_runs();
  REQUIRE(runs.size() == 2);
  for (const auto& run : runs) {
    CHECK(run.status == store::RunStatus::completed);
    CHECK(server.open().series_columns(run.id, "loss").front().steps.size() == 20);
  }
  // Done on the server: nothing is submitted again.
  const auto again =
      test::run_expctl({"--db", server.location, "--local-db", d.db.string(), "sweep", file.string(), "--slurm"},
                       {{"SLURM_CONF", slurm.conf()}});
  CHECK_THAT(again.out, Catch::Contains("nothing to submit"));
}

TEST_CASE("slurm: sweep --wait without --slurm is refused, and --slurm without a Slurm says so in one line") {
  RunDir d;
  const fs::path file = tiny_sweep(d);
  const auto refused = d.expctl({"sweep", file.string(), "--wait"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--wait follows a submitted array: give --slurm too"));
  // No Slurm client on the PATH: expctl says which command it could not run and what to install.
  const auto no_client =
      test::run_expctl({"--db", d.db.string(), "sweep", file.string(), "--slurm"}, {{"PATH", d.dir.path().string()}});
  CHECK(no_client.exit_code == 1);
  CHECK_THAT(no_client.err, Catch::Contains("expctl: error: slurm: cannot run sbatch") &&
                                Catch::Contains("apt-get install slurm-client"));
  CHECK((!fs::exists(d.db) || d.open().list_runs().empty()));
}

TEST_CASE("slurm: a cancelled 2-rank job's run is interrupted, and its line does not promise a resume it cannot do",
          "[slurm]") {
  test::cli::ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const std::string job = slurm.submit(batch_script(d, 2, {"run", tiny_spec(), "--set", "train.max_steps=1000000"}));
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
  REQUIRE(eventually([&] { return job_output(d, job).find("step ") != std::string::npos; }));
  REQUIRE(slurm.client({"scancel", job}).exit_code == 0);  // SIGTERM to every task, as a time limit sends
  slurm.wait_for(job);
  const std::string output = job_output(d, job);
  INFO(output);
  CHECK(d.open().find_run(run->id).status == store::RunStatus::interrupted);
  CHECK(has_checkpoint(run->run_dir / "checkpoints", 0));
  CHECK(!has_checkpoint(run->run_dir / "checkpoints", 1));  // only rank 0 knows the run's folder
  CHECK_THAT(output, Catch::Contains("continue with     a new run: ranks an external launcher started cannot be "
                                     "resumed yet"));
  CHECK_THAT(output, !Catch::Contains("expctl resume"));
  // And resume says why, without touching the run (--allow-drift: the job's OMP_NUM_THREADS=1 is
  // not this test's environment).
  const auto refused = d.expctl({"resume", run->id, "--allow-drift"});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("cannot be resumed: an external launcher started its ranks "
                                          "(launcher:slurm), and under one only rank 0 writes checkpoints"));
  CHECK(d.open().find_run(run->id).status == store::RunStatus::interrupted);  // left as it was
}
