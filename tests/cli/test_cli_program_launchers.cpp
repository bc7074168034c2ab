// A team's program when more than one `expctl` supervises its ranks (docs/program.md, "Several
// nodes, torchrun, mpirun, Slurm"): one `expctl run` per rank under an external launcher (its
// environment as torchrun and mpirun set it, and a real torchrun), and `--nnodes 2` with both
// nodes on this machine. The run of record (global rank 0's, node 0's) holds every rank's steps.
#include <sys/stat.h>

#include "cli/run_helpers.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

// Two ranks that meet through torch's env:// rendezvous and all-reduce every step: rank r logs
// loss (1 + 2) / step + r, so a step of either rank says the all-reduce happened. Each prints what
// the contract told it to stderr.
constexpr const char* k_meeting_program =
    "import os, sys, torch, torch.distributed as dist, expctl\n"
    "dist.init_process_group('gloo')\n"
    "rank = dist.get_rank()\n"
    "print('contract', *(os.environ[k] for k in ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', "
    "'GROUP_RANK', 'EXPCTL_RUN_ID')), file=sys.stderr, flush=True)\n"
    "for step in range(1, 6):\n"
    "    t = torch.tensor([float(rank + 1)])\n"
    "    dist.all_reduce(t)\n"
    "    expctl.log(step, loss=t.item() / step + rank, samples=4)\n"
    "dist.destroy_process_group()\n";

struct Meeting {
  RunDir d;
  fs::path spec;
  explicit Meeting(int ranks_per_node = 2) {
    d.dir.write("meet.py", k_meeting_program);
    spec = d.dir.write("meet.yaml", "seed: 3\ndistributed:\n  nproc_per_node: " + std::to_string(ranks_per_node) +
                                        "\n  timeout_s: 60\nprogram:\n  command: [/usr/bin/python3, meet.py]\n");
  }
};

std::string free_port(int salt) { return std::to_string(20000 + (::getpid() * 7 + salt) % 20000); }

// `env` with the launcher's variables of `rank` of 2 on one host, then expctl run.
std::vector<std::string> rank_command(const std::string& launcher, int rank, const std::string& port,
                                      const std::vector<std::string>& expctl_args) {
  std::vector<std::string> argv = {"env", "-u", "TORCHELASTIC_USE_AGENT_STORE", "-u", "EXPCTL_CONTROL_FD", "-u",
                                   "RANK", "-u", "OMPI_COMM_WORLD_RANK", "-u", "SLURM_PROCID"};
  const std::string r = std::to_string(rank);
  if (launcher == "torchrun") {
    argv.insert(argv.end(), {"RANK=" + r, "WORLD_SIZE=2", "LOCAL_RANK=" + r, "LOCAL_WORLD_SIZE=2", "GROUP_RANK=0"});
  } else {
    argv.insert(argv.end(), {"OMPI_COMM_WORLD_RANK=" + r, "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=" + r,
                             "OMPI_COMM_WORLD_LOCAL_SIZE=2"});
  }
  argv.insert(argv.end(), {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, test::expctl_binary()});
  argv.insert(argv.end(), expctl_args.begin(), expctl_args.end());
  return argv;
}

// A launcher's command line, with the variables a test process may have inherited removed.
util::SubprocessResult run_launcher(const std::vector<std::string>& argv) {
  util::SubprocessOptions options;
  options.env = {{"EXPCTL_DB", std::nullopt}, {"EXPCTL_CONTROL_FD", std::nullopt}, {"RANK", std::nullopt},
                 {"TORCHELASTIC_USE_AGENT_STORE", std::nullopt}, {"NO_COLOR", "1"}};
  options.timeout = std::chrono::minutes(3);
  auto result = util::run_capture(argv, options);
  REQUIRE(result.has_value());
  return *result;
}

}  // namespace

TEST_CASE("program launchers: under torchrun's or mpirun's variables each rank's expctl runs the program as that "
          "rank, and rank 0 records every rank") {
  for (const std::string launcher : {"torchrun", "mpirun"}) {
    CAPTURE(launcher);
    const Meeting m;
    const std::string port = free_port(launcher == "torchrun" ? 1 : 2);
    const std::vector<std::string> args = {"--db", m.d.db.string(), "run", m.spec.string(), "--format", "json"};
    Background rank0(rank_command(launcher, 0, port, args), m.d.dir / "rank0");
    Background rank1(rank_command(launcher, 1, port, args), m.d.dir / "rank1");
    const int code0 = rank0.wait();
    const int code1 = rank1.wait();
    INFO("rank 0: " << rank0.out() << rank0.err() << "\nrank 1: " << rank1.out() << rank1.err());
    REQUIRE(code0 == 0);
    REQUIRE(code1 == 0);
    CHECK(rank1.out().empty());  // only rank 0 reports
    const json document = json::parse(rank0.out());
    const std::string id = document.at("run").at("id");
    CHECK(document.at("run").at("status") == "completed");
    const auto tags = document.at("run").at("tags");
    CHECK(std::find(tags.begin(), tags.end(), "launcher:" + launcher) != tags.end());
    const json& summary = document.at("summary");
    CHECK(summary.at("world_size") == 2);
    CHECK(summary.at("ranks_recorded") == 2);
    CHECK(summary.at("program").at("steps_logged") == 10);
    CHECK_FALSE(summary.at("program").contains("parts_missing"));
    const auto db = m.d.open();
    CHECK(db.list_runs().size() == 1);
    CHECK(series(db, id, "loss", 0) == std::map<std::int64_t, double>{{1, 3.0}, {2, 1.5}, {3, 1.0}, {4, 0.75}, {5, 0.6}});
    CHECK(series(db, id, "loss", 1).at(1) == 4.0);  // rank 1's own step, handed over at the end
    CHECK(series(db, id, "samples_per_sec", 1).size() == 4);
    CHECK(db.ranks(id).size() == 2);
    // Rank 1 has no run folder of its own: its log joins the run's, with the run's id in it.
    const auto run_dir = fs::path(document.at("run").at("run_dir").get<std::string>());
    CHECK_THAT(read_text(run_dir / "logs" / "rank-1.log"), Catch::Contains("contract 1 1 2 2 0 " + id));
    CHECK_THAT(read_text(run_dir / "logs" / "rank-0.log"), Catch::Contains("contract 0 0 2 2 0 " + id));
  }
}

TEST_CASE("program launchers: a rank of another expctl that fails fails the run of record, naming it") {
  RunDir d;
  const auto file = d.dir.write("prog.sh",
                                "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then echo 'Traceback: rank one broke' >&2; exit 3; fi\n"
                                "echo '{\"step\": 1, \"loss\": 0.5}' >&3\n");
  ::chmod(file.c_str(), 0755);
  const auto spec = d.dir.write("p.yaml", "distributed:\n  nproc_per_node: 2\n  timeout_s: 30\n"
                                          "program:\n  command: [./prog.sh]\n");
  const std::string port = free_port(3);
  const std::vector<std::string> args = {"--db", d.db.string(), "run", spec.string(), "--format", "json"};
  Background rank0(rank_command("mpirun", 0, port, args), d.dir / "rank0");
  Background rank1(rank_command("mpirun", 1, port, args), d.dir / "rank1");
  const int code0 = rank0.wait();
  const int code1 = rank1.wait();
  INFO("rank 0: " << rank0.out() << rank0.err() << "\nrank 1: " << rank1.out() << rank1.err());
  CHECK(code0 == 1);
  CHECK(code1 == 1);
  CHECK_THAT(rank1.err(), Catch::Contains("expctl: rank 1 of run ") && Catch::Contains("failed: rank 1 exited with code 3"));
  const json run = json::parse(rank0.out()).at("run");
  CHECK(run.at("status") == "failed");
  CHECK(run.at("root_cause") == "rank 1 exited with code 3\nlast lines of rank 1:\n  Traceback: rank one broke");
  const auto ranks = d.open().ranks(run.at("id").get<std::string>());
  REQUIRE(ranks.size() == 2);
  CHECK(ranks.at(1).exit_code == 3);
  CHECK(ranks.at(1).status == store::RunStatus::failed);
  // One process cannot continue what the launcher's ranks ran.
  const auto resumed = d.expctl({"resume", run.at("id").get<std::string>()});
  CHECK(resumed.exit_code == 2);
  CHECK_THAT(resumed.err, Catch::Contains("was started by mpirun, one `expctl run` per rank: it cannot be resumed"));
}

TEST_CASE("program launchers: a real torchrun starts expctl on every rank, and its agent's store is the one used") {
  // Debian 12's torchrun (torch 1.13 on Python 3.11) crashes in its log-redirection setup unless
  // given --redirects/--tee (docs/program.md); python3 -m torch.distributed.run is torchrun.
  const Meeting m;
  const auto result = run_launcher(
      {"/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
       "--master_port", free_port(4), "--log_dir", (m.d.dir / "torchrun-logs").string(), "--no_python",
       test::expctl_binary(), "--db", m.d.db.string(), "run", m.spec.string()});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const auto db = m.d.open();
  const auto runs = db.list_runs();
  REQUIRE(runs.size() == 1);
  const auto& run = runs.front();
  CHECK(run.status == store::RunStatus::completed);
  CHECK(std::find(run.tags.begin(), run.tags.end(), "launcher:torchrun") != run.tags.end());
  CHECK(series(db, run.id, "loss", 0).size() == 5);
  CHECK(series(db, run.id, "loss", 1).at(5) == 1.6);
  // torchrun's agent hosted the store: the program's ranks were told to join it as clients.
  CHECK_THAT(read_text(run.run_dir / "logs" / "rank-1.log"), Catch::Contains("contract 1 1 2 2 0 " + run.id));
}

TEST_CASE("program launchers: two nodes started with --nnodes 2 meet, and node 0's run holds both ranks' steps") {
  const Meeting m(1);
  const std::string port = closed_port();
  const auto node = [&](int rank) {
    return std::vector<std::string>{test::expctl_binary(), "--db", (m.d.dir / ("node" + std::to_string(rank)) / "expctl.db").string(),
                                    "run", m.spec.string(), "--nnodes", "2", "--node-rank", std::to_string(rank),
                                    "--master-addr", "127.0.0.1", "--master-port", port, "--format", "json"};
  };
  Background node0(node(0), m.d.dir / "node0");
  Background node1(node(1), m.d.dir / "node1");
  const int code0 = node0.wait();
  const int code1 = node1.wait();
  INFO("node 0: " << node0.out() << node0.err() << "\nnode 1: " << node1.out() << node1.err());
  REQUIRE(code0 == 0);
  REQUIRE(code1 == 0);
  const json doc0 = json::parse(node0.out());
  const json doc1 = json::parse(node1.out());
  CHECK(doc0.at("summary").at("world_size") == 2);
  CHECK(doc0.at("summary").at("ranks_recorded") == 2);
  CHECK(doc1.at("summary").at("ranks_recorded") == 1);
  const auto tags = doc1.at("run").at("tags");
  CHECK(std::find(tags.begin(), tags.end(), "node:1") != tags.end());
  const auto store0 = store::Store::open(m.d.dir / "node0" / "expctl.db", store::OpenMode::read_only);
  const std::string id0 = doc0.at("run").at("id");
  CHECK(series(store0, id0, "loss", 1).at(1) == 4.0);  // node 1's rank, handed over at the end
  CHECK(store0.ranks(id0).size() == 2);
  // Two nodes of one rank compute what one node of two computes.
  RunDir single;
  const auto local = single.expctl({"run", m.spec.string(), "--set", "distributed.nproc_per_node=2", "--format", "json"});
  REQUIRE(local.exit_code == 0);
  CHECK(sha_of(doc0) == sha_of(parse_stdout(local)));
}

TEST_CASE(
    "program launchers: a rank whose rank 0 never publishes the run exits 1 naming where it waited, and starts "
    "no program") {
  RunDir d;
  const auto marker = d.dir / "program-started";
  const auto file = d.dir.write("prog.sh", "#!/bin/sh\ntouch " + marker.string() + "\n");
  ::chmod(file.c_str(), 0755);
  const auto spec = d.dir.write("p.yaml",
                                "distributed:\n  nproc_per_node: 2\n  timeout_s: 3\n"
                                "program:\n  command: [./prog.sh]\n");
  const std::string port = closed_port();
  // Rank 0 is never started (refused, or dead before it published): rank 1 waits timeout_s.
  const auto rank1 =
      run_launcher(rank_command("mpirun", 1, port, {"--db", d.db.string(), "run", spec.string(), "--format", "json"}));
  INFO(rank1.out << rank1.err);
  CHECK(rank1.exit_code == 1);
  CHECK_THAT(rank1.err,
             Catch::Contains("rank 1: rank 0 did not publish its run at 127.0.0.1:" + port + " within 3 s") &&
                 Catch::Contains("no program was started on this rank"));
  CHECK_FALSE(fs::exists(marker));
  CHECK_FALSE(fs::exists(d.db));  // nothing was recorded by a rank other than 0
}

TEST_CASE("program launchers: a rank that never hands its steps over is named in the run of record's summary") {
  RunDir d;
  const auto file = d.dir.write("prog.sh", "#!/bin/sh\necho '{\"step\": 1, \"loss\": 0.5}' >&$EXPCTL_METRICS_FD\n");
  ::chmod(file.c_str(), 0755);
  const auto spec = d.dir.write("p.yaml",
                                "distributed:\n  nproc_per_node: 2\n  timeout_s: 3\n"
                                "program:\n  command: [./prog.sh]\n");
  // Only rank 0 is started: its program completes, and rank 1's part never comes.
  const auto rank0 = run_launcher(
      rank_command("torchrun", 0, closed_port(), {"--db", d.db.string(), "run", spec.string(), "--format", "json"}));
  INFO(rank0.out << rank0.err);
  REQUIRE(rank0.exit_code == 0);
  const json document = json::parse(rank0.out);
  CHECK(document.at("run").at("status") == "completed");
  CHECK(document.at("summary").at("program").at("parts_missing") == "rank(s) 1 handed over no steps within 3 s");
  CHECK(document.at("summary").at("program").at("steps_logged") == 1);
}
