// `expctl run SPEC --slurm` against a real slurmctld (a throwaway single-node Slurm 22.05): the run
// recorded `queued` with its job, trained by the job under expctl's supervisor, and — requeued or
// preempted — resumed by the job under the same id, bit for bit.

#include <thread>

#include "run_helpers.hpp"
#include "slurm_cluster.hpp"
#include "unit/store/backend_fixture.hpp"

#include "expctl/launch/slurm_job.hpp"
#include "expctl/store/testing.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

using Env = std::map<std::string, std::optional<std::string>>;

// A 2-rank run of the tiny spec: 3000 steps (some seconds), checkpoints every 100 steps.
std::vector<std::string> long_slurm_run() {
  return {"run",   tiny_spec(),
          "--set", "train.max_steps=3000",
          "--set", "train.eval_every=0",
          "--set", "distributed.nproc_per_node=2",
          "--set", "train.checkpoint_every=100",
          "--set", "distributed.timeout_s=60"};
}

// A 40-step run whose job Slurm holds for 10 minutes: it stays queued until cancelled.
std::vector<std::string> held_slurm_run() {
  auto args = long_slurm_run();
  args.insert(args.end(), {"--set", "train.max_steps=40", "--sbatch=--begin=now+600"});
  return args;
}

Env slurm_env(const ThrowawaySlurm& slurm) {
  return {{"SLURM_CONF", slurm.conf()}, {"OMP_NUM_THREADS", "1"}};
}

util::SubprocessResult expctl_on(const RunDir& d, const ThrowawaySlurm& slurm, std::vector<std::string> args) {
  args.insert(args.begin(), {"--db", d.db.string()});
  return test::run_expctl(args, slurm_env(slurm));
}

std::string job_of(const store::RunRecord& run) {
  for (const auto& tag : run.tags) {
    if (tag.starts_with("slurm-job:")) {
      return tag.substr(10);
    }
  }
  return "";
}

std::string slurm_output(const store::RunRecord& run) {
  std::string text;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(run.run_dir / "logs", ignored)) {
    if (entry.path().filename().string().starts_with("slurm-")) {
      text += read_text(entry.path());
    }
  }
  return text;
}

// The run id a submission without --wait prints on stdout.
std::string printed_id(const util::SubprocessResult& submitted) {
  std::string id = submitted.out;
  while (!id.empty() && id.back() == '\n') {
    id.pop_back();
  }
  return id;
}

// The run submitted with `args` (no --wait): its id from stdout.
store::RunRecord submit(const RunDir& d, const ThrowawaySlurm& slurm, std::vector<std::string> args) {
  args.push_back("--slurm");
  const auto submitted = expctl_on(d, slurm, args);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  return d.open().find_run(printed_id(submitted));
}

std::size_t steps_stored(const RunDir& d, const std::string& id) {
  return d.open().metrics(id, {.name = "loss", .rank = 0}).size();
}

// After Slurm requeued the job (it holds a requeued job back 120 s: BeginTime), lets it start now.
// Two races, both seen here under load:
// - the 120 s hold is there because the node revoked the first run's job credential at the
//   requeue: a start in the same second is refused (the job FAILED, exit 1, run time 0, the run
//   left queued), so the release waits 2 s after the job turns pending;
// - Slurm sets BeginTime again when the first run has finished completing, which can overwrite
//   one `StartTime=now` (the job then waited out the whole hold): the release is said again each
//   second until the job leaves pending.
void release(const ThrowawaySlurm& slurm, const std::string& job) {
  REQUIRE(eventually([&] {
    const auto info = slurm.jobs().query(job);
    return info && info->state == launch::slurm::JobState::pending;
  }));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  bool started = false;
  for (int attempt = 0; attempt < 90; ++attempt) {
    const auto info = slurm.jobs().query(job);
    if (!info || info->state != launch::slurm::JobState::pending) {
      started = true;
      break;
    }
    // May fail where the job has just started: the state, read again, decides.
    (void)slurm.client({"scontrol", "update", "JobId=" + job, "StartTime=now"});
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO("scontrol: " << slurm.client({"scontrol", "show", "job", "-o", job}).out);
  REQUIRE(started);
}

store::RunRecord wait_until_ended(const RunDir& d, const std::string& id, const ThrowawaySlurm* slurm = nullptr,
                                  const std::string& job = "") {
  store::RunRecord run;
  const bool ended = eventually(
      [&] {
        run = d.open().find_run(id);
        return run.status != store::RunStatus::queued && run.status != store::RunStatus::running;
      },
      std::chrono::seconds(180));
  INFO(slurm_output(run));
  // Where the run did not end, what Slurm says of its job (held, pending and why, running).
  INFO("scontrol: " << (slurm != nullptr ? slurm->client({"scontrol", "show", "job", "-o", job}).out : ""));
  REQUIRE(ended);
  return run;
}

// The run's loss curve against an uninterrupted local run of the same spec.
void check_equals_local(const RunDir& d, const store::RunRecord& run) {
  const json shown = parse_stdout(d.expctl({"show", run.id, "--format", "json"}));
  RunDir local;
  auto args = long_slurm_run();
  args.insert(args.end(), {"--format", "json"});
  const auto here = local.expctl(args);
  REQUIRE(here.exit_code == 0);
  CHECK(sha_of(shown) == sha_of(parse_stdout(here)));
}

}  // namespace

TEST_CASE("slurm run: --slurm --wait records the run queued with its job and completes it as a local run does",
          "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  auto args = long_slurm_run();
  args.insert(args.end(), {"--slurm", "--wait", "--format", "json", "--time", "10"});
  const auto waited = expctl_on(d, slurm, args);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  CHECK_THAT(waited.err, Catch::Contains("queued as Slurm job"));
  const json document = parse_stdout(waited);
  CHECK(document.at("run").at("status") == "completed");
  const auto run = d.open().find_run(document.at("run").at("id").get<std::string>());
  const std::string job = job_of(run);
  REQUIRE_FALSE(job.empty());
  CHECK(slurm.wait_for(job) == "COMPLETED");
  const json summary = document.at("summary");
  CHECK(summary.at("slurm").at("job") == job);
  CHECK(summary.at("slurm").at("restarts") == 0);
  CHECK(summary.at("slurm").at("node_list") == "localhost");
  CHECK(summary.at("slurm").at("queued_s").get<double>() >= 0.0);
  CHECK(summary.at("invocations") == 1);
  CHECK(run.environment_hash.has_value());  // the node's fingerprint, taken in the job
  CHECK(d.open().ranks(run.id).size() == 2);
  CHECK(fs::exists(run.run_dir / "slurm-job.sh"));
  check_equals_local(d, run);
}

TEST_CASE("slurm run: a queued run shows its job, is cancelled before it starts, and resume --slurm completes it",
          "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const auto args = held_slurm_run();
  const auto queued = submit(d, slurm, args);
  CHECK(queued.status == store::RunStatus::queued);
  const std::string job = job_of(queued);
  CHECK_THAT(queued.root_cause, Catch::Contains("waiting for Slurm job " + job));
  CHECK_FALSE(queued.owner.has_value());
  const json listed = parse_stdout(d.expctl({"list", "--status", "queued", "--format", "json"}));
  REQUIRE(listed.at("runs").size() == 1);
  const auto shown = d.expctl({"show", queued.id});
  CHECK_THAT(shown.out, Catch::Contains("queued") && Catch::Contains("slurm-job:" + job));
  const auto watched = d.expctl({"watch", queued.id, "--once"});
  CHECK_THAT(watched.out, Catch::Contains("queued  step 0") && Catch::Contains("waiting for Slurm job " + job));
  CHECK_THAT(watched.out, !Catch::Contains("ended"));  // waiting is not an end
  // A queued run is its job's: not resumed here, not removed, not collected.
  CHECK_THAT(d.expctl({"resume", queued.id}).err, Catch::Contains("is queued"));
  CHECK_THAT(d.expctl({"rm", queued.id}).err, Catch::Contains("expctl cancel " + queued.id));

  const auto cancelled = expctl_on(d, slurm, {"cancel", queued.id});
  INFO(cancelled.out << cancelled.err);
  REQUIRE(cancelled.exit_code == 0);
  CHECK_THAT(cancelled.out, Catch::Contains("interrupted"));
  auto run = d.open().find_run(queued.id);
  CHECK(run.status == store::RunStatus::interrupted);
  CHECK_THAT(run.root_cause, Catch::Contains("resume " + queued.id + " --slurm"));
  CHECK(slurm.wait_for(job) == "CANCELLED");
  CHECK(expctl_on(d, slurm, {"cancel", queued.id}).exit_code == 2);  // nothing left to cancel

  const auto resumed = expctl_on(d, slurm, {"resume", queued.id, "--slurm", "--wait", "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  run = d.open().find_run(queued.id);
  CHECK(run.status == store::RunStatus::completed);
  CHECK(steps_stored(d, run.id) == 40);
  CHECK(std::count_if(run.tags.begin(), run.tags.end(), [](const std::string& tag) {
          return tag.starts_with("slurm-job:");
        }) == 2);  // the cancelled job's and the resuming one's
}

TEST_CASE(
    "slurm run: a run whose job ended outside expctl gets a note from list and show, and cancel records it "
    "without scancel",
    "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const auto args = held_slurm_run();
  const auto queued = submit(d, slurm, args);
  const std::string job = job_of(queued);
  // While the job waits, nothing is noted.
  CHECK_THAT(expctl_on(d, slurm, {"list"}).out, !Catch::Contains("note:"));
  REQUIRE(slurm.client({"scancel", job}).exit_code == 0);
  CHECK(slurm.wait_for(job) == "CANCELLED");

  // The store still reads queued (nothing of expctl ran); Slurm says the job has ended.
  const std::string note = "note: run " + queued.id + " reads queued, but its Slurm job " + job +
                           " has ended (CANCELLED) without starting it: `expctl cancel " + queued.id +
                           "` records it interrupted, then `expctl resume " + queued.id + " --slurm` submits it again";
  const auto listed = expctl_on(d, slurm, {"list"});
  INFO(listed.out << listed.err);
  CHECK(listed.exit_code == 0);
  CHECK_THAT(listed.out, Catch::Contains(note + "\n"));
  const json listed_json = parse_stdout(expctl_on(d, slurm, {"list", "--format", "json"}));
  REQUIRE(listed_json.at("slurm_job_ended").size() == 1);
  CHECK(listed_json.at("slurm_job_ended")[0].at("run_id") == queued.id);
  CHECK(listed_json.at("slurm_job_ended")[0].at("job_state") == "CANCELLED");
  CHECK_THAT(expctl_on(d, slurm, {"show", queued.id}).out, Catch::Contains(note));
  CHECK(parse_stdout(expctl_on(d, slurm, {"show", queued.id, "--format", "json"})).at("slurm_job_ended").at("job") ==
        job);
  // watch would wait for an end that never comes: it says so and stops.
  const auto watched = expctl_on(d, slurm, {"watch", queued.id});
  CHECK(watched.exit_code == 1);
  CHECK_THAT(watched.err, Catch::Contains("expctl: run " + queued.id + " reads queued, but its Slurm job " + job +
                                          " has ended (CANCELLED)"));
  // A Slurm that cannot be asked notes nothing, and fails nothing.
  const auto unreachable =
      test::run_expctl({"--db", d.db.string(), "list"}, {{"SLURM_CONF", "/nonexistent/slurm.conf"}});
  CHECK(unreachable.exit_code == 0);
  CHECK_THAT(unreachable.out, Catch::Contains(queued.id) && !Catch::Contains("note:"));

  const auto cancelled = expctl_on(d, slurm, {"cancel", queued.id});
  INFO(cancelled.out << cancelled.err);
  REQUIRE(cancelled.exit_code == 0);
  auto run = d.open().find_run(queued.id);
  CHECK(run.status == store::RunStatus::interrupted);
  CHECK_THAT(run.root_cause, Catch::Contains("Slurm job " + job + " had ended (CANCELLED) without starting it") &&
                                 Catch::Contains("resume " + queued.id + " --slurm"));
  CHECK_THAT(expctl_on(d, slurm, {"list"}).out, !Catch::Contains("note:"));

  // A run a node recorded running, whose job then ended with that node (here: its row as a node
  // elsewhere left it, its heartbeat fresh, so the store cannot yet call it lost).
  const auto second = submit(d, slurm, args);
  const std::string second_job = job_of(second);
  REQUIRE(slurm.client({"scancel", second_job}).exit_code == 0);
  CHECK(slurm.wait_for(second_job) == "CANCELLED");
  store::testing::execute_sql(
      d.db,
      "UPDATE runs SET status = 'running', owner_host = 'node-elsewhere', owner_pid = 4242, owner_boot_id = "
      "'boot', owner_start_ticks = 1, heartbeat_at = '" +
          store::format_utc(store::Clock::now()) + "' WHERE id = '" + second.id + "'");
  CHECK_THAT(expctl_on(d, slurm, {"show", second.id}).out,
             Catch::Contains("note: run " + second.id + " reads running, but its Slurm job " + second_job +
                             " has ended (CANCELLED) and its expctl recorded no stop"));
  const auto cancelled_running = expctl_on(d, slurm, {"cancel", second.id});
  INFO(cancelled_running.out << cancelled_running.err);
  REQUIRE(cancelled_running.exit_code == 0);
  run = d.open().find_run(second.id);
  CHECK(run.status == store::RunStatus::interrupted);
  CHECK_THAT(run.root_cause, Catch::Contains("recorded no stop (killed, or its node failed)") &&
                                 Catch::Contains("from its last checkpoint"));
}

TEST_CASE("slurm run: a job requeued at step ~150 resumes the same run from its checkpoint, bit for bit", "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const auto queued = submit(d, slurm, long_slurm_run());
  const std::string job = job_of(queued);
  REQUIRE(eventually([&] { return steps_stored(d, queued.id) >= 150; }, std::chrono::seconds(120)));
  const auto requeued = slurm.client({"scontrol", "requeue", job});
  INFO(requeued.err);
  REQUIRE(requeued.exit_code == 0);
  store::RunRecord waiting;
  REQUIRE(eventually([&] { return (waiting = d.open().find_run(queued.id)).status == store::RunStatus::queued; }));
  CHECK_THAT(waiting.root_cause, Catch::Contains("resumes the run from its checkpoint at step"));
  const auto at_requeue = steps_stored(d, queued.id);
  WARN("requeued after " << at_requeue << " of 3000 steps: " << waiting.root_cause);
  CHECK(at_requeue < 3000);
  release(slurm, job);

  const auto run = wait_until_ended(d, queued.id);
  INFO(run.root_cause << "\n" << slurm_output(run));
  CHECK(run.status == store::RunStatus::completed);
  const json summary = json::parse(run.summary_json);
  CHECK(summary.at("invocations") == 2);
  CHECK(summary.at("slurm").at("restarts") == 1);
  CHECK(summary.at("steps") == 3000);
  check_equals_local(d, run);
}

TEST_CASE("slurm run: a preemption signal checkpoints, requeues the job and resumes the run bit for bit", "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  auto args = long_slurm_run();
  args.insert(args.end(), {"--time", "30"});
  const auto queued = submit(d, slurm, args);
  const std::string job = job_of(queued);
  REQUIRE(eventually([&] { return steps_stored(d, queued.id) >= 150; }, std::chrono::seconds(120)));
  // What a preemption's warning does: SIGTERM to the job's steps while the job runs on, far from
  // its 30-minute limit. expctl reads the job's state, checkpoints and requeues the job itself.
  const auto signalled = slurm.client({"scancel", "--signal=TERM", job});
  INFO(signalled.err);
  REQUIRE(signalled.exit_code == 0);
  store::RunRecord waiting;
  REQUIRE(eventually([&] { return (waiting = d.open().find_run(queued.id)).status == store::RunStatus::queued; }));
  CHECK_THAT(waiting.root_cause, Catch::Contains("preempted") && Catch::Contains("expctl requeued the job"));
  release(slurm, job);

  const auto run = wait_until_ended(d, queued.id, &slurm, job);
  CHECK(run.status == store::RunStatus::completed);
  const json summary = json::parse(run.summary_json);
  CHECK(summary.at("invocations") == 2);
  CHECK(summary.at("slurm").at("restarts") == 1);
  check_equals_local(d, run);
}

TEST_CASE(
    "slurm run: a run of two nodes records one run per node, and requeued both resume under their ids bit for bit",
    "[slurm]") {
  ThrowawaySlurm slurm(2);  // nodes n1 and n2, each its own slurmd on this machine
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  auto args = long_slurm_run();
  args.insert(args.end(), {"--set", "distributed.nnodes=2", "--set", "distributed.nproc_per_node=1", "--slurm"});
  args.insert(args.begin(), {"--db", d.db.string()});
  Env env = slurm_env(slurm);
  env["MASTER_ADDR"] = "127.0.0.1";  // the nodes' names resolve nowhere: every node is this machine
  const auto submitted = test::run_expctl(args, env);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const std::string id = printed_id(submitted);
  const auto head = d.open().find_run(id);
  const std::string job = job_of(head);
  CHECK(std::find(head.tags.begin(), head.tags.end(), "node:0") != head.tags.end());
  REQUIRE(eventually([&] { return steps_stored(d, head.id) >= 150; }, std::chrono::seconds(120)));
  const auto requeued = slurm.client({"scontrol", "requeue", job});
  INFO(requeued.err);
  REQUIRE(requeued.exit_code == 0);
  REQUIRE(eventually([&] { return d.open().find_run(head.id).status == store::RunStatus::queued; }));
  release(slurm, job);

  const auto run = wait_until_ended(d, head.id, &slurm, job);
  INFO(run.root_cause << "\n" << slurm_output(run));
  REQUIRE(run.status == store::RunStatus::completed);
  CHECK(json::parse(run.summary_json).at("invocations") == 2);
  // Node 1's run: recorded by the job's first start there, resumed by its second, its rank's steps all there.
  const auto nodes = d.open().list_runs({.tag = "node-of:" + head.id});
  REQUIRE(nodes.size() == 1);
  const auto& node = nodes.front();
  REQUIRE(eventually([&] { return store::has_ended(d.open().find_run(node.id).status); }));
  const auto node_now = d.open().find_run(node.id);
  CHECK(node_now.status == store::RunStatus::completed);
  CHECK(std::find(node.tags.begin(), node.tags.end(), "node:1") != node.tags.end());
  CHECK(std::find(node.tags.begin(), node.tags.end(), "slurm-job:" + job) != node.tags.end());
  CHECK(node.spec_hash == head.spec_hash);
  CHECK(json::parse(node_now.summary_json).at("invocations") == 2);
  CHECK(d.open().metrics(node.id, {.name = "loss", .rank = 1}).size() == 3000);
  CHECK(d.open().metrics(head.id, {.name = "loss", .rank = 0}).size() == 3000);
  CHECK(d.open().list_runs().size() == 2);
  check_equals_local(d, run);  // 2 ranks on one node: the same world, the same curve
  // A node's part is not resumed alone: its head run is.
  const auto alone = expctl_on(d, slurm, {"resume", node.id, "--slurm"});
  CHECK(alone.exit_code == 2);
  CHECK_THAT(alone.err, Catch::Contains("resume " + head.id + " --slurm"));
}

TEST_CASE("slurm run: with a team server as --db the job records into the shared --local-db and ships the run",
          "[slurm][postgres]") {
  ThrowawaySlurm slurm;
  test::BackendStore server(store::StoreKind::postgresql);
  if (!slurm.available() || !server.available) {
    return;
  }
  server.open();  // the team's server holds an expctl store (`expctl sync` makes one)
  RunDir d;
  Env env = slurm_env(slurm);
  env["EXPCTL_DB"] = std::nullopt;
  const auto team = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", server.location, "--local-db", d.db.string()});
    return test::run_expctl(args, env);
  };
  auto args = long_slurm_run();
  args.push_back("--slurm");
  const auto submitted = team(args);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const std::string id = printed_id(submitted);
  CHECK(server.open().run(id).has_value());  // on the team's list from its submission
  const auto run = wait_until_ended(d, id, &slurm, job_of(d.open().find_run(id)));
  CHECK(run.status == store::RunStatus::completed);
  // The server reaches the job in sbatch's environment, never in its script.
  const std::string script = read_text(run.run_dir / "slurm-job.sh");
  CHECK_THAT(script, Catch::Contains("--local-db") && !Catch::Contains(server.location));
  REQUIRE(eventually([&] {
    const auto shipped = server.open().run(id);
    return shipped && shipped->status == store::RunStatus::completed;
  }));
  CHECK(server.open().series_columns(id, "loss").front().steps.size() == 3000);
  check_equals_local(d, run);

  // A queued run cancelled from the submitting node: interrupted here and on the server.
  auto held = long_slurm_run();
  held.insert(held.end(), {"--slurm", "--sbatch=--begin=now+600"});
  const auto second = team(held);
  REQUIRE(second.exit_code == 0);
  const std::string waiting = printed_id(second);
  const auto cancelled = team({"cancel", waiting});
  INFO(cancelled.out << cancelled.err);
  CHECK(cancelled.exit_code == 0);
  CHECK(d.open().find_run(waiting).status == store::RunStatus::interrupted);
  CHECK(server.open().run(waiting).value().status == store::RunStatus::interrupted);
}

TEST_CASE("slurm run: --slurm refuses a missing sbatch in one line") {
  RunDir d;
  const auto no_sbatch =
      test::run_expctl({"--db", d.db.string(), "run", tiny_spec(), "--slurm"}, {{"PATH", d.dir.path().string()}});
  CHECK(no_sbatch.exit_code != 0);
  CHECK_THAT(no_sbatch.err, Catch::Contains("sbatch") && Catch::Contains("nothing was recorded"));
  CHECK(d.open().list_runs().empty());
  const auto wait_alone = d.expctl({"run", tiny_spec(), "--wait"});
  CHECK(wait_alone.exit_code == 2);
  CHECK_THAT(wait_alone.err, Catch::Contains("give --slurm too"));
}

TEST_CASE("slurm run: a program run (the PyTorch DDP example) goes through --slurm as through a local run", "[slurm]") {
  ThrowawaySlurm slurm;
  if (!slurm.available()) {
    return;
  }
  RunDir d;
  const fs::path dir = d.dir / "python-ddp";
  fs::create_directories(dir);
  for (const char* file : {"ddp.yaml", "train.py"}) {
    fs::copy_file(test::source_dir() / "experiments" / "python-ddp" / file, dir / file);
  }
  const auto waited =
      expctl_on(d, slurm, {"run", (dir / "ddp.yaml").string(), "--slurm", "--wait", "--format", "json"});
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const json document = parse_stdout(waited);
  CHECK(document.at("run").at("status") == "completed");
  CHECK(document.at("summary").at("steps") == 64);
  CHECK_FALSE(document.at("summary").at("slurm").at("job").get<std::string>().empty());
  const std::string id = document.at("run").at("id");
  CHECK(d.open().metrics(id, {.name = "loss", .rank = 1}).size() == 64);  // every rank's steps, as locally

  RunDir local;
  const auto here = local.expctl({"run", (dir / "ddp.yaml").string(), "--format", "json"});
  REQUIRE(here.exit_code == 0);
  CHECK(sha_of(document) == sha_of(parse_stdout(here)));
}
