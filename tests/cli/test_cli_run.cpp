// `expctl run` and `expctl resume` end to end: the real binary trains 2 ranks on the CI-sized
// synthetic spec (experiments/tiny-synthetic.yaml), and the store is read back to check what was
// recorded. Processes started here are killed and reaped by their owners; nothing is killed by
// name.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "cli/run_helpers.hpp"

using namespace expctl;
using test::run_expctl;
namespace fs = std::filesystem;
using nlohmann::json;

using namespace expctl::test::cli;

TEST_CASE("run: a 2-rank run completes with metrics per rank and every summary field") {
  RunDir d;
  const auto result = d.expctl({"run", tiny_spec(), "--format", "json", "--set", "train.checkpoint_every=10"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json document = parse_stdout(result);
  CHECK(document.at("kind") == "run");
  CHECK(document.at("run").at("status") == "completed");
  for (const char* field : k_summary_fields) {
    INFO(field);
    CHECK_FALSE(document.at("summary").at(field).is_null());
  }
  CHECK(document.at("summary").at("steps") == 60);
  CHECK(document.at("summary").at("world_size") == 2);
  CHECK(document.at("summary").at("ranks_recorded") == 2);
  CHECK(document.at("summary").at("loss_curve_sha256").get<std::string>().size() == 64);

  auto db = d.open();
  const auto run = db.find_run(document.at("run").at("id").get<std::string>());
  CHECK(run.status == store::RunStatus::completed);
  CHECK(run.exit_code == 0);
  const auto ranks = db.ranks(run.id);
  REQUIRE(ranks.size() == 2);
  for (const auto& rank : ranks) {
    CHECK(rank.status == store::RunStatus::completed);
    CHECK(rank.pid.has_value());
    CHECK(db.metrics(run.id, {.name = "step_time_ms", .rank = rank.rank}).size() == 60);
    CHECK(db.metrics(run.id, {.name = "loss", .rank = rank.rank}).size() == 60);
  }
  CHECK(db.metrics(run.id, {.name = "eval_accuracy", .rank = 0}).size() == 2);  // steps 30 and 60
  std::vector<std::string> artifacts;
  for (const auto& artifact : db.artifacts(run.id)) {
    artifacts.push_back(artifact.path);
  }
  CHECK(std::find(artifacts.begin(), artifacts.end(), "checkpoints/rank0-step60.pt") != artifacts.end());
  CHECK(std::find(artifacts.begin(), artifacts.end(), "logs/rank-1.log") != artifacts.end());
  for (const auto& path : artifacts) {
    CHECK(fs::exists(run.run_dir / path));  // pruned checkpoints are not listed
  }
  CHECK(std::find(artifacts.begin(), artifacts.end(), "checkpoints/rank0-step50.pt") != artifacts.end());
  CHECK(std::find(artifacts.begin(), artifacts.end(), "checkpoints/rank0-step40.pt") == artifacts.end());
  CHECK(fs::exists(run.run_dir / "resolved.json"));

  const auto shown = d.expctl({"show", run.id, "--format", "json"});
  REQUIRE(shown.exit_code == 0);
  CHECK(sha_of(parse_stdout(shown)) == sha_of(document));
}

TEST_CASE("run: the same spec twice gives the same loss_curve_sha256 and another seed a different one") {
  RunDir d;
  const auto first = d.expctl({"run", tiny_spec(), "--format", "json"});
  const auto second = d.expctl({"run", tiny_spec(), "--format", "json"});
  const auto reseeded = d.expctl({"run", tiny_spec(), "--set", "seed=8", "--format", "json"});
  REQUIRE(first.exit_code == 0);
  REQUIRE(second.exit_code == 0);
  REQUIRE(reseeded.exit_code == 0);
  CHECK(sha_of(parse_stdout(first)) == sha_of(parse_stdout(second)));
  CHECK(sha_of(parse_stdout(first)) != sha_of(parse_stdout(reseeded)));
}

TEST_CASE(
    "run: --tensorboard DIR records as the spec's metrics.tensorboard does, DIR taken from where run "
    "starts and as it is written") {
  RunDir d;
  // A directory name, not a YAML value: as the override `metrics.tensorboard=@tb` it was refused
  // ("@" starts no YAML scalar).
  const fs::path tensorboard = d.dir / "@tb";
  const auto run_with = [&](const std::vector<std::string>& options) {
    std::vector<std::string> args = {"--db",  d.db.string(),       "run",      tiny_spec(),
                                     "--set", "train.max_steps=2", "--format", "json"};
    args.insert(args.end(), options.begin(), options.end());
    const auto result = run_expctl(args, {}, d.dir.path().string());
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return parse_stdout(result).at("run");
  };
  const json by_flag = run_with({"--tensorboard", "@tb"});
  const json by_spec = run_with({"--set", "metrics.tensorboard='" + tensorboard.string() + "'"});
  const json without = run_with({});
  CHECK(by_flag.at("spec_hash") == by_spec.at("spec_hash"));
  CHECK(by_flag.at("spec_hash") == without.at("spec_hash"));  // a location: never hashed
  const auto resolved = [](const json& run) { return read_text(fs::path(run.at("run_dir")) / "resolved.json"); };
  CHECK(resolved(by_flag) == resolved(by_spec));
  CHECK(json::parse(resolved(by_flag)).at("spec").at("metrics").at("tensorboard") == tensorboard.string());
  for (const json& run : {by_flag, by_spec}) {
    CHECK(fs::is_directory(tensorboard / run.at("id").get<std::string>() / "rank0"));
  }
}

TEST_CASE("run: text output names the run with its loss and accuracy and samples/s and wall time") {
  RunDir d;
  const auto result = d.expctl({"run", tiny_spec(), "--set", "train.max_steps=20"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find(" completed") != std::string::npos);
  for (const char* label : {"final train loss", "eval accuracy", "samples/s", "wall time"}) {
    CHECK(result.out.find(label) != std::string::npos);
  }
  // Without a terminal, rank 0's progress lines appear every metrics.log_every (10) steps.
  CHECK(result.err.find("[rank 0] step 10/20") != std::string::npos);
  CHECK(result.err.find("[rank 0] step 20/20") != std::string::npos);
  CHECK(result.err.find("[rank 1] step") == std::string::npos);
}

TEST_CASE("run: SIGKILL of one rank fails the run with its root cause and leaves no process") {
  RunDir d;
  const auto started = std::chrono::steady_clock::now();
  Background expctl(d.argv({"run", tiny_spec(), "--set", "train.max_steps=100000", "--set", "train.eval_every=0"}),
                    d.dir / "run");
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
  wait_for_training(*run);
  const fs::path pid_file = run->run_dir / "logs" / "rank-1.pid";
  const auto rank0 = static_cast<pid_t>(std::stol(read_text(run->run_dir / "logs" / "rank-0.pid")));
  const auto rank1 = static_cast<pid_t>(std::stol(read_text(pid_file)));
  const auto killed = std::chrono::steady_clock::now();
  REQUIRE(::kill(rank1, SIGKILL) == 0);
  const int code = expctl.wait();
  WARN("expctl exited " << std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count()
                        << " s after the SIGKILL ("
                        << std::chrono::duration<double>(killed - started).count() << " s into the run)");
  INFO(expctl.out() << expctl.err());
  CHECK(code == 1);
  const auto finished = d.open().find_run(run->id);
  CHECK(finished.status == store::RunStatus::failed);
  CHECK(finished.exit_code == 1);
  CHECK(finished.root_cause.find("rank 1 was killed by SIGKILL") != std::string::npos);
  // distributed.max_restarts is 0 by default: one invocation, nothing restarted.
  CHECK(finished.root_cause.find("restart") == std::string::npos);
  const json summary = json::parse(finished.summary_json);
  CHECK(summary.at("invocations") == 1);
  CHECK_FALSE(summary.contains("invocation_causes"));
  CHECK(expctl.err().find("restarted") == std::string::npos);
  const auto ranks = d.open().ranks(run->id);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].status == store::RunStatus::failed);
  CHECK(ranks[1].signal == SIGKILL);
  CHECK(eventually([&] { return process_gone(rank0) && process_gone(rank1); }, std::chrono::seconds(10)));
}

namespace {

/// Interrupts a 3000-step run with SIGINT once rank 0 is training, resumes it, and checks it
/// against an uninterrupted run of the same spec on `ranks` ranks.
void interrupt_and_resume(int ranks) {
  RunDir d;
  auto run_args = std::vector<std::string>{"run", tiny_spec(), "--format", "json", "--set", "train.max_steps=3000",
                                           "--set", "train.eval_every=0", "--set",
                                           "distributed.nproc_per_node=" + std::to_string(ranks)};
  std::string interrupted_id;
  {
    const auto run = interrupt_when_training(d, run_args);
    interrupted_id = run.id;
    const auto stopped = d.open().find_run(run.id);
    CHECK(stopped.status == store::RunStatus::interrupted);
    CHECK(stopped.exit_code == 130);
    for (int rank = 0; rank < ranks; ++rank) {
      CHECK(has_checkpoint(run.run_dir / "checkpoints", rank));
    }
    const auto steps = d.open().metrics(run.id, {.name = "loss", .rank = 0}).size();
    WARN("interrupted after " << steps << " of 3000 steps");
    CHECK(steps < 3000);
  }
  const auto resumed = d.expctl({"resume", interrupted_id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json resumed_doc = parse_stdout(resumed);
  CHECK(resumed_doc.at("run").at("id") == interrupted_id);
  CHECK(resumed_doc.at("run").at("status") == "completed");
  CHECK(resumed_doc.at("summary").at("steps") == 3000);
  CHECK(resumed_doc.at("summary").at("invocations") == 2);
  // Why the second invocation started (a restart's cause goes the same way: test_cli_restarts.cpp).
  CHECK_THAT(resumed_doc.at("summary").at("invocation_causes").at("2").get<std::string>(),
             Catch::StartsWith("expctl resume: resumed from its checkpoint at step "));

  const auto reference = d.expctl(run_args);
  REQUIRE(reference.exit_code == 0);
  CHECK(sha_of(resumed_doc) == sha_of(parse_stdout(reference)));

  const auto again = d.expctl({"resume", interrupted_id});
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("is completed: only an interrupted, failed or lost run can be resumed") != std::string::npos);
}

}  // namespace

TEST_CASE("run: SIGINT interrupts with a checkpoint and resume ends with the uninterrupted loss curve - 1 rank") {
  interrupt_and_resume(1);
}

// With 2 ranks this also proves the DDP hooks survive loading a checkpoint: when loading replaced
// the parameters' storage, no bucket was all-reduced after a resume and the curves drifted apart.
TEST_CASE("run: SIGINT interrupts with a checkpoint and resume ends with the uninterrupted loss curve - 2 ranks") {
  interrupt_and_resume(2);
}

TEST_CASE("run: a drifted stack exits 3 unless --allow-drift which records the drift") {
  RunDir d;
  d.dir.write("envs/elsewhere.toml", "description = \"a machine that is not this one\"\n[os]\nid = \"plan9\"\n");
  std::string spec = read_text(tiny_spec());
  spec += "env: envs/elsewhere.toml\n";
  const auto spec_path = d.dir.write("drift.yaml", spec).string();

  const auto refused = d.expctl({"run", spec_path});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 3);
  CHECK(refused.err.find("this machine does not match the pinned stack (1 of 1 pins differ)") != std::string::npos);
  CHECK(refused.err.find("plan9") != std::string::npos);
  CHECK_FALSE(fs::exists(d.db));

  const auto allowed = d.expctl({"run", spec_path, "--allow-drift", "--set", "train.max_steps=5", "--format", "json"});
  INFO(allowed.out << allowed.err);
  REQUIRE(allowed.exit_code == 0);
  const json document = parse_stdout(allowed);
  const json drift = document.at("summary").at("drift");
  REQUIRE(drift.size() == 1);
  CHECK(drift[0].at("pinned") == "plan9");
  const auto tags = document.at("run").at("tags");
  CHECK(std::find(tags.begin(), tags.end(), "drift:os.id") != tags.end());
}

TEST_CASE("run: node 0's rendezvous port in use exits 2 naming it, before anything is recorded") {
  RunDir d;
  // Hold a port the way another job would: listening on every interface.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(holder >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::listen(holder, 1) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const auto port = std::to_string(ntohs(address.sin_port));
  // Node 0 of two hosts the TCP store (a single node needs no port: see the next test).
  const auto result = d.expctl(
      {"run", tiny_spec(), "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", port});
  ::close(holder);
  INFO(result.out << result.err);
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("cannot host the rendezvous store on port " + port) != std::string::npos);
  CHECK(result.err.find("choose another --master-port") != std::string::npos);
  CHECK_FALSE(fs::exists(d.db));
}

namespace {

/// Inodes of the sockets process `pid` has open.
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "fd", error)) {
    const auto target = fs::read_symlink(entry.path(), error).string();
    if (!error && target.starts_with("socket:[")) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  return inodes;
}

/// A TCP socket among `inodes`: its state and local address (kernel hex, as in /proc/net/tcp{,6}).
struct TcpSocket {
  std::string state;  ///< "0A" = LISTEN, "01" = ESTABLISHED
  std::string local_address;
};

std::vector<TcpSocket> tcp_sockets(const std::set<std::string>& inodes) {
  std::vector<TcpSocket> sockets;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(read_text(table));
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (inodes.contains(inode)) {
        sockets.push_back({state, local.substr(0, local.find(':'))});
      }
    }
  }
  return sockets;
}

}  // namespace

TEST_CASE("run: a single node's ranks meet in a private file store, and nothing listens beyond loopback") {
  RunDir d;
  const fs::path tmp = d.dir / "tmp";
  fs::create_directories(tmp);
  const auto rendezvous_files = [&] {
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(tmp)) {
      if (entry.path().filename().string().starts_with("expctl-rendezvous-")) {
        found.push_back(entry.path());
      }
    }
    return found;
  };
  {
    const std::optional<std::string> saved = std::getenv("TMPDIR") ? std::optional<std::string>(std::getenv("TMPDIR"))
                                                                   : std::nullopt;
    ::setenv("TMPDIR", tmp.c_str(), 1);  // inherited by the child only; restored at once
    Background expctl(d.argv({"run", tiny_spec(), "--set", "train.max_steps=3000", "--set", "train.eval_every=0"}),
                      d.dir / "listen");
    saved ? ::setenv("TMPDIR", saved->c_str(), 1) : ::unsetenv("TMPDIR");
    std::optional<store::RunRecord> run;
    REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
    wait_for_training(*run);
    // Should a check below fail, say what the run was doing (its output so far, and the log).
    INFO("expctl stderr so far: " << expctl.err() << "\nrank 0 log: " << read_text(run->run_dir / "logs" / "rank-0.log"));

    const auto files = rendezvous_files();
    REQUIRE(files.size() == 1);
    CHECK((fs::status(files[0]).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
    std::set<std::string> inodes = socket_inodes(expctl.pid());
    for (int rank = 0; rank < 2; ++rank) {
      const auto pid_text = read_text(run->run_dir / "logs" / ("rank-" + std::to_string(rank) + ".pid"));
      const auto rank_inodes = socket_inodes(static_cast<pid_t>(std::stol(pid_text)));
      inodes.insert(rank_inodes.begin(), rank_inodes.end());
    }
    // No rendezvous store listens (Gloo closes its listener once the pairs are connected); every
    // socket there is, Gloo's connections included, is on loopback.
    const auto sockets = tcp_sockets(inodes);
    CHECK_FALSE(sockets.empty());  // the ranks' Gloo pair: the checks below are not vacuous
    std::string listing;
    for (const auto& socket : sockets) {
      listing += socket.state + " " + socket.local_address + "\n";
    }
    INFO("sockets (state, local address):\n" << listing);
    for (const auto& socket : sockets) {
      // 127.0.0.1, ::1 or ::ffff:127.0.0.1, in /proc's byte order.
      CHECK((socket.local_address == "0100007F" || socket.local_address == "00000000000000000000000001000000" ||
             socket.local_address == "0000000000000000FFFF00000100007F"));
    }
    REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
    INFO(expctl.out() << expctl.err());
    CHECK(expctl.wait() == 130);
  }
  CHECK(rendezvous_files().empty());
}

TEST_CASE("resume: a machine whose fingerprint differs from the run's exits 3 unless --allow-drift") {
  RunDir d;
  // A run that fails at once (its data is missing) leaves a resumable run behind quickly.
  const std::vector<std::string> failing = {"run", tiny_spec(), "--set", "data.dataset=mnist", "--set",
                                            "data.root=" + (d.dir / "no-such-data").string()};
  auto args = failing;
  args.insert(args.begin(), {"--db", d.db.string()});
  const auto failed = run_expctl(args, {{"OMP_NUM_THREADS", "1"}});
  INFO(failed.out << failed.err);
  REQUIRE(failed.exit_code == 1);
  const auto run = d.only_run();
  REQUIRE(run.has_value());
  REQUIRE(run->status == store::RunStatus::failed);

  // OMP_NUM_THREADS is recorded in the fingerprint and changes the computation.
  const auto refused = run_expctl({"--db", d.db.string(), "resume", run->id}, {{"OMP_NUM_THREADS", "2"}});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 3);
  CHECK(refused.err.find("vars.OMP_NUM_THREADS  1         2             yes") != std::string::npos);
  CHECK(refused.err.find("run " + run->id + " was recorded on a different stack (1 fingerprint field(s) differ)") !=
        std::string::npos);
  CHECK(d.open().find_run(run->id).status == store::RunStatus::failed);  // untouched

  // The same stack resumes (from scratch: the run never wrote a checkpoint; and it fails again on
  // the missing data: exit 1), recording no drift.
  const auto same =
      run_expctl({"--db", d.db.string(), "resume", run->id, "--from-scratch"}, {{"OMP_NUM_THREADS", "1"}});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 1);
  const auto before = d.open().find_run(run->id).tags;
  CHECK(std::none_of(before.begin(), before.end(), [](const std::string& tag) { return tag.starts_with("drift:"); }));

  const auto allowed =
      run_expctl({"--db", d.db.string(), "resume", run->id, "--allow-drift", "--from-scratch"},
                 {{"OMP_NUM_THREADS", "2"}});
  INFO(allowed.out << allowed.err);
  CHECK(allowed.exit_code == 1);
  const auto tags = d.open().find_run(run->id).tags;
  CHECK(std::find(tags.begin(), tags.end(), "drift:env.vars.OMP_NUM_THREADS") != tags.end());
}

TEST_CASE("run: a malformed spec exits 2 and leaves the store untouched") {
  RunDir d;
  const auto spec = d.dir.write("bad.yaml", "name: bad\ntrain:\n  max_step: 10\n").string();
  const auto result = d.expctl({"run", spec});
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("bad.yaml:3:3") != std::string::npos);
  CHECK(result.err.find("max_steps") != std::string::npos);  // did you mean
  CHECK_FALSE(fs::exists(d.db));
  CHECK_FALSE(fs::exists(d.dir / "results"));
}

namespace {

/// Two network namespaces joined by a veth pair (10.77.<n>.1 and .2); deleted on destruction.
struct NamespacePair {
  std::string a = "expctl-a-" + std::to_string(::getpid());
  std::string b = "expctl-b-" + std::to_string(::getpid());
  bool created = false;
  std::string problem;

  static bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

  NamespacePair() {
    if (::geteuid() != 0) {
      problem = "not root: ip netns needs CAP_SYS_ADMIN";
      return;
    }
    if (!sh("ip netns add " + a)) {
      problem = "ip netns add is not permitted here";
      return;
    }
    created = true;
    const std::string veth_a = "exa" + std::to_string(::getpid() % 100000);
    const std::string veth_b = "exb" + std::to_string(::getpid() % 100000);
    const bool ok = sh("ip netns add " + b) &&
                    sh("ip link add " + veth_a + " netns " + a + " type veth peer name " + veth_b + " netns " + b) &&
                    sh("ip -n " + a + " addr add 10.77.0.1/24 dev " + veth_a) &&
                    sh("ip -n " + b + " addr add 10.77.0.2/24 dev " + veth_b) &&
                    sh("ip -n " + a + " link set " + veth_a + " up") && sh("ip -n " + b + " link set " + veth_b + " up") &&
                    sh("ip -n " + a + " link set lo up") && sh("ip -n " + b + " link set lo up");
    if (!ok) {
      problem = "could not wire the veth pair between the namespaces";
    }
  }
  ~NamespacePair() {
    if (created) {
      sh("ip netns del " + a);  // deleting a namespace deletes its end of the veth pair
      sh("ip netns del " + b);
    }
  }
  NamespacePair(const NamespacePair&) = delete;
  NamespacePair& operator=(const NamespacePair&) = delete;
};

}  // namespace

TEST_CASE("run: two nodes in network namespaces train together over TCP", "[netns]") {
  NamespacePair namespaces;
  if (!namespaces.problem.empty()) {
    test::skip("netns", namespaces.problem);
    return;
  }
  test::TempDir dir;
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  const auto node = [&](const std::string& ns, int rank) {
    return std::vector<std::string>{
        "ip", "netns", "exec", ns, test::expctl_binary(), "--db", (dir / ("node" + std::to_string(rank)) / "expctl.db").string(),
        "run", tiny_spec(), "--set", "distributed.nproc_per_node=1", "--nnodes", "2", "--node-rank",
        std::to_string(rank), "--master-addr", "10.77.0.1", "--master-port", port, "--format", "json"};
  };
  Background node0(node(namespaces.a, 0), dir / "node0");
  Background node1(node(namespaces.b, 1), dir / "node1");
  const int code0 = node0.wait();
  const int code1 = node1.wait();
  INFO("node 0: " << node0.out() << node0.err());
  INFO("node 1: " << node1.out() << node1.err());
  REQUIRE(code0 == 0);
  REQUIRE(code1 == 0);
  const json doc0 = json::parse(node0.out());
  const json doc1 = json::parse(node1.out());
  CHECK(doc0.at("summary").at("world_size") == 2);
  CHECK(doc0.at("summary").at("steps") == 60);
  // The records come together on node 0: rank 1's steps were gathered to rank 0 at the end.
  CHECK(doc0.at("summary").at("ranks_recorded") == 2);
  CHECK(doc1.at("summary").at("ranks_recorded") == 1);
  const auto node0_store = store::Store::open(dir / "node0" / "expctl.db", store::OpenMode::read_only);
  const auto run0 = doc0.at("run").at("id").get<std::string>();
  CHECK(node0_store.metrics(run0, {.name = "step_time_ms", .rank = 1}).size() == 60);
  CHECK(node0_store.metrics(run0, {.name = "loss", .rank = 1}).size() == 60);
  CHECK(doc1.at("run").at("status") == "completed");
  const auto tags = doc1.at("run").at("tags");
  CHECK(std::find(tags.begin(), tags.end(), "node:1") != tags.end());
  // Two ranks on two nodes compute what two ranks on one node compute: the same loss curve.
  RunDir single;
  const auto local = single.expctl({"run", tiny_spec(), "--format", "json"});
  REQUIRE(local.exit_code == 0);
  CHECK(sha_of(doc0) == sha_of(parse_stdout(local)));
}

TEST_CASE(
    "run: under torchrun with 2 ranks past the checkpoint pace's 20 steps, rank 0's record holds both ranks' steps") {
  // Past step 21 the ranks gather their pace once (train.checkpoint_every_s, 600 s by default):
  // every rank must join, though only rank 0 has a checkpoint folder.
  RunDir d;
  const std::string port = std::to_string(20000 + (::getpid() + 7) % 20000);
  const auto rank = [&](int r) {
    return std::vector<std::string>{"env",
                                    "-u",
                                    "TORCHELASTIC_USE_AGENT_STORE",
                                    "-u",
                                    "EXPCTL_CONTROL_FD",
                                    "RANK=" + std::to_string(r),
                                    "WORLD_SIZE=2",
                                    "LOCAL_RANK=" + std::to_string(r),
                                    "LOCAL_WORLD_SIZE=2",
                                    "GROUP_RANK=0",
                                    "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + port,
                                    test::expctl_binary(),
                                    "--db",
                                    d.db.string(),
                                    "run",
                                    tiny_spec(),
                                    "--set",
                                    "train.max_steps=30",
                                    "--set",
                                    "distributed.timeout_s=20",
                                    "--format",
                                    "json"};
  };
  Background rank0(rank(0), d.dir / "rank0");
  Background rank1(rank(1), d.dir / "rank1");
  const int code0 = rank0.wait();
  const int code1 = rank1.wait();
  INFO("rank 0: " << rank0.out() << rank0.err() << "\nrank 1: " << rank1.out() << rank1.err());
  REQUIRE(code0 == 0);
  REQUIRE(code1 == 0);
  const json document = json::parse(rank0.out());
  CHECK(document.at("summary").at("ranks_recorded") == 2);
  const auto db = d.open();
  const auto id = document.at("run").at("id").get<std::string>();
  const auto own = db.metrics(id, {.name = "loss", .rank = 0});
  const auto reported = db.metrics(id, {.name = "loss", .rank = 1});
  REQUIRE(reported.size() == 30);
  CHECK(reported.back().step == 30);
  CHECK(own.size() == 30);
  CHECK(own.front().value != reported.front().value);  // rank 1's own shard, not a copy of rank 0's
  CHECK(db.list_runs().size() == 1);                  // rank 1 recorded nothing itself
}

TEST_CASE("run: under an external launcher the process is one rank and global rank 0 records the run") {
  RunDir d;
  const std::map<std::string, std::optional<std::string>> torchrun = {
      {"RANK", "0"},          {"WORLD_SIZE", "1"},           {"LOCAL_RANK", "0"},     {"LOCAL_WORLD_SIZE", "1"},
      {"GROUP_RANK", "0"},    {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"},     {"EXPCTL_DB", std::nullopt},
      {"NO_COLOR", "1"}};
  auto env = torchrun;
  env["MASTER_PORT"] = std::to_string(20000 + ::getpid() % 20000);
  const auto result = run_expctl({"--db", d.db.string(), "run", tiny_spec(), "--set", "distributed.nproc_per_node=1",
                                  "--set", "train.max_steps=20", "--format", "json"},
                                 env);
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const json document = parse_stdout(result);
  CHECK(document.at("run").at("status") == "completed");
  CHECK(document.at("summary").at("steps") == 20);
  const auto tags = document.at("run").at("tags");
  CHECK(std::find(tags.begin(), tags.end(), "launcher:torchrun") != tags.end());
  CHECK(std::find(tags.begin(), tags.end(), "ci") != tags.end());
  // No supervisor: no per-rank log files, the rank's lines went to the launcher's output.
  CHECK_FALSE(fs::exists(fs::path(document.at("run").at("run_dir").get<std::string>()) / "logs" / "rank-0.log"));
  CHECK(result.out.find("step 20/20") == std::string::npos);  // stdout is the JSON summary only
}

TEST_CASE("run: under an external launcher rank 0 stores its own CPU use and memory once a second") {
  // No supervisor samples a rank that torchrun started: the recording rank samples itself.
  RunDir d;
  std::map<std::string, std::optional<std::string>> env = {
      {"RANK", "0"},       {"WORLD_SIZE", "1"},          {"LOCAL_RANK", "0"},        {"LOCAL_WORLD_SIZE", "1"},
      {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"EXPCTL_DB", std::nullopt}};
  env["MASTER_PORT"] = std::to_string(20000 + (::getpid() + 7) % 20000);
  const std::vector<std::string> args = {"--db",     d.db.string(),
                                         "run",      tiny_spec(),
                                         "--set",    "train.max_steps=8000",
                                         "--set",    "train.eval_every=0",
                                         "--set",    "distributed.nproc_per_node=1",
                                         "--format", "json"};
  const auto result = run_expctl(args, env);
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const auto id = parse_stdout(result).at("run").at("id").get<std::string>();
  const auto db = d.open();
  const auto cpu = db.metrics(id, {.name = "sys_cpu_percent", .rank = 0});
  const auto rss = db.metrics(id, {.name = "sys_rss_mb", .rank = 0});
  REQUIRE(cpu.size() >= 1);  // a run of some seconds: a reading a second after the first
  REQUIRE(rss.size() == cpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    CHECK(cpu[i].value > 1.0);  // the training process is busy
    CHECK(cpu[i].value < 400.0);
    CHECK(rss[i].value > 20.0);  // LibTorch alone is more than this
    CHECK(rss[i].value < 8192.0);
  }
  // Turned off as a supervised run's are.
  env["EXPCTL_SYS_METRICS"] = "0";
  const auto off = run_expctl(args, env);
  REQUIRE(off.exit_code == 0);
  CHECK(d.open().metrics(parse_stdout(off).at("run").at("id").get<std::string>(), {.name = "sys_rss_mb"}).empty());
}

TEST_CASE("run: -vv reaches the ranks, whose logs then hold their debug lines") {
  RunDir d;
  const auto logs_of = [](const expctl::util::SubprocessResult& result) {
    return fs::path(parse_stdout(result).at("run").at("run_dir").get<std::string>()) / "logs";
  };
  const auto verbose = d.expctl({"-vv", "run", tiny_spec(), "--format", "json"});
  INFO(verbose.err);
  REQUIRE(verbose.exit_code == 0);
  for (const char* log : {"rank-0.log", "rank-1.log"}) {
    CHECK_THAT(read_text(logs_of(verbose) / log), Catch::Contains("debug: malloc:"));
  }
  const auto plain = d.expctl({"run", tiny_spec(), "--format", "json"});
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(read_text(logs_of(plain) / "rank-0.log"), !Catch::Contains("debug:"));
}

// Issue 41, observation 6: `show` did not show the run's hyperparameters, its text embedded a
// 659-character raw JSON line, and the phase bar's letters were not explained.
TEST_CASE("run: show lists the resolved hyperparameters by section with defaults marked, a phase-bar legend and no "
          "raw JSON") {
  RunDir d;
  const auto ran = d.expctl({"run", tiny_spec(), "--set", "train.max_steps=20", "--set", "optim.lr=0.07"});
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  const auto shown = d.expctl({"show", "@latest"});
  INFO(shown.out << shown.err);
  REQUIRE(shown.exit_code == 0);
  const std::string& out = shown.out;
  CHECK_THAT(out, Catch::Contains("\nhyperparameters (as resolved; \"default\" marks a value the spec left as it "
                                  "was)\n  general\n    name ") &&
                      Catch::Contains("\n  optim\n    name "));
  const auto line_of = [&](const std::string& start) {
    const auto at = out.find(start);
    REQUIRE(at != std::string::npos);
    return out.substr(at, out.find('\n', at) - at);
  };
  CHECK_THAT(line_of("    lr "), Catch::Contains("0.07") && !Catch::Contains("default"));
  CHECK_THAT(line_of("    weight_decay "), Catch::EndsWith("default"));
  CHECK_THAT(line_of("    hidden_sizes "), Catch::Contains("32") && !Catch::Contains("["));
  CHECK_THAT(out, Catch::Contains("  bar: 40 characters = one step; d data wait, f forward, b backward, c communication "
                                  "wait,\n       o optimizer, . other\n"));
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(line.size() < 200);
    CHECK(line.find("{\"") == std::string::npos);  // no JSON object in text output
  }
  const auto json_shown = d.expctl({"show", "@latest", "--format", "json"});
  CHECK(json::parse(json_shown.out).at("spec").at("values").at("optim").at("lr") == 0.07);
}

// Issue 41, observation 9: docs/run.md's torchrun command failed with Debian 12's torchrun
// (torch 1.13: --nproc-per-node and --no-python are unknown; its default --redirects 0 crashes
// on Python 3.11). The command is read from the page and run with the torchrun the README
// installs (python3-torch), on the CI spec.
TEST_CASE("run: docs/run.md's torchrun command runs with Debian's torchrun and records one run of both ranks") {
  const fs::path torchrun = "/usr/bin/torchrun";
  REQUIRE(fs::exists(torchrun));  // scripts/install-deps.sh installs python3-torch, which has it
  std::string command;
  {
    std::istringstream page(read_text(test::source_dir() / "docs" / "run.md"));
    for (std::string line; std::getline(page, line);) {
      if (line.starts_with("torchrun ")) {
        command = line;
        break;
      }
    }
  }
  REQUIRE_THAT(command, Catch::EndsWith(" --no_python expctl run experiments/quickstart.yaml"));
  std::vector<std::string> argv;
  {
    std::istringstream words(command.substr(0, command.size() - std::string(" expctl run experiments/quickstart.yaml").size()));
    for (std::string word; words >> word;) {
      argv.push_back(word == "torchrun" ? torchrun.string() : word);
    }
  }
  RunDir d;
  const int port = 20000 + (::getpid() + 11) % 20000;
  argv.insert(argv.begin() + 1, {"--master_port=" + std::to_string(port), "--log_dir=" + (d.dir / "torchrun-logs").string()});
  for (const std::string& word : {test::expctl_binary(), std::string("--db"), d.db.string(), std::string("run"),
                                  tiny_spec(), std::string("--set"), std::string("train.max_steps=10")}) {
    argv.push_back(word);
  }
  Background job(argv, d.dir / "torchrun");
  const int code = job.wait();
  INFO(command << "\n" << job.out() << job.err());
  REQUIRE(code == 0);
  const auto runs = d.open().list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(std::find(runs[0].tags.begin(), runs[0].tags.end(), "launcher:torchrun") != runs[0].tags.end());
  CHECK(d.open().metrics(runs[0].id, {.name = "loss", .rank = 1}).size() == 10);
}

TEST_CASE("run: where NVML sees a rank's processes on a GPU, its utilization and memory are stored beside its CPU") {
  // The stand-in NVML (tests/support/fake_nvml.cpp) puts every child of the supervisor on one GPU
  // at 61 % with 321 MiB each: what expctl records of NVML's answers, on a machine without a GPU.
  RunDir d;
  const auto result = test::run_expctl(
      {"--db", d.db.string(), "run", tiny_spec(), "--set", "train.max_steps=6000", "--set", "train.eval_every=0",
       "--format", "json"},
      {{"EXPCTL_NVML_LIBRARY", EXPCTL_TEST_FAKE_NVML}, {"FAKE_NVML_UTILIZATION", "61"}, {"FAKE_NVML_MIB", "321"}});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const auto id = parse_stdout(result).at("run").at("id").get<std::string>();
  const auto db = d.open();
  for (const int rank : {0, 1}) {
    INFO("rank " << rank);
    const auto gpu = db.metrics(id, {.name = "sys_gpu_percent", .rank = rank});
    const auto memory = db.metrics(id, {.name = "sys_gpu_mem_mb", .rank = rank});
    const auto cpu = db.metrics(id, {.name = "sys_cpu_percent", .rank = rank});
    REQUIRE(gpu.size() >= 1);
    REQUIRE(memory.size() == gpu.size());
    CHECK(gpu.size() == cpu.size());
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      CHECK(gpu[i].value == 61.0);
      CHECK(memory[i].value == 321.0);
      CHECK(gpu[i].step == cpu[i].step);
    }
  }
  // `show` lists them with the run's other series.
  const auto show = d.expctl({"show", id});
  CHECK_THAT(show.out, Catch::Contains("sys_gpu_percent") && Catch::Contains("sys_gpu_mem_mb"));
  // Without NVML (this machine), the same run stores no GPU series.
  const auto plain = d.expctl(
      {"run", tiny_spec(), "--set", "train.max_steps=3000", "--set", "train.eval_every=0", "--format", "json"});
  REQUIRE(plain.exit_code == 0);
  const auto plain_id = parse_stdout(plain).at("run").at("id").get<std::string>();
  CHECK(d.open().metrics(plain_id, {.name = "sys_gpu_percent"}).empty());
}

TEST_CASE("run: each rank's CPU use and memory are stored once a second as sys_cpu_percent and sys_rss_mb") {
  RunDir d;
  const auto result = d.expctl(
      {"run", tiny_spec(), "--set", "train.max_steps=8000", "--set", "train.eval_every=0", "--format", "json"});
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  const auto id = parse_stdout(result).at("run").at("id").get<std::string>();
  const auto db = d.open();
  for (const int rank : {0, 1}) {
    const auto cpu = db.metrics(id, {.name = "sys_cpu_percent", .rank = rank});
    const auto rss = db.metrics(id, {.name = "sys_rss_mb", .rank = rank});
    INFO("rank " << rank);
    REQUIRE(cpu.size() >= 2);  // a run of several seconds: a reading a second after the first
    REQUIRE(rss.size() == cpu.size());
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      if (i > 0) {
        CHECK(cpu[i].step > cpu[i - 1].step);  // at most one reading a step: the series only grows
      }
      CHECK(cpu[i].value > 1.0);  // a training rank is busy
      CHECK(cpu[i].value < 400.0);
      CHECK(rss[i].value > 20.0);  // LibTorch alone is more than this
      CHECK(rss[i].value < 8192.0);
    }
  }
}
