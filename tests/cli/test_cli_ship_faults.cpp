// Nothing lost, nothing misread under the faults of a week (issue 49), through the real binary:
// the team server stopped near a run's end, a run that ends while it is away, and `resume` of a
// completed run, which must refuse (exit 2) and never crash on its way out.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>

#include <unistd.h>

#include "run_helpers.hpp"
#include "unit/store/backend_fixture.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/store/ship_pending.hpp"
#include "expctl/util/sha256.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/subprocess.hpp"

using namespace expctl;
using test::run_expctl;
using test::cli::Background;
using test::cli::eventually;
namespace fs = std::filesystem;

namespace {

/// A PostgreSQL server of the test's own (scripts/pg-throwaway.sh, a Unix socket), which it may
/// stop and start; stopped and deleted with the object.
struct PrivateServer {
  std::string script = (test::source_dir() / "scripts" / "pg-throwaway.sh").string();
  // Not inside a TempDir (mode 0700, root's): the server runs as the postgres user.
  fs::path dir = fs::temp_directory_path() / fmt::format("expctl-pg-ship-{}-{}", ::getpid(), std::random_device{}());
  std::string conninfo;

  PrivateServer() {
    const auto started = util::run_capture({script, "start", dir.string()}, {.timeout = std::chrono::minutes(2)});
    REQUIRE(started.has_value());
    INFO(started->err);
    REQUIRE(started->exit_code == 0);
    conninfo = started->out.substr(0, started->out.find('\n'));
  }
  ~PrivateServer() { (void)util::run_capture({script, "stop", dir.string()}); }
  void pg_ctl(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {script, "pg_ctl", dir.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto done = util::run_capture(argv, {.timeout = std::chrono::minutes(2)});
    REQUIRE(done.has_value());
    INFO(done->err);
    REQUIRE(done->exit_code == 0);
  }
  void stop() const { pg_ctl({"-m", "immediate", "-w", "stop"}); }
  void start() const { pg_ctl({"-l", (dir / "server.log").string(), "-w", "start"}); }
  std::int64_t count(const std::string& sql) const { return std::stoll(store::testing::query_postgres(conninfo, sql)); }
};

/// A node: its local store and runs folder, and the arguments that point expctl at them.
struct Node {
  test::TempDir dir;
  fs::path local = dir / "results" / "expctl.db";
  std::vector<std::string> args(const std::string& server, std::vector<std::string> more) const {
    std::vector<std::string> argv = {test::expctl_binary(),
                                     "--db",
                                     server,
                                     "--local-db",
                                     local.string(),
                                     "--runs-dir",
                                     (dir / "results" / "runs").string()};
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  }
  store::RunRecord only_run() const {
    auto db = store::Store::open(local.string(), store::OpenMode::read_only);
    const auto runs = db.list_runs();
    REQUIRE(runs.size() == 1);
    return runs.front();
  }
  std::int64_t points() const {
    auto db = store::Store::open(local.string(), store::OpenMode::read_only);
    return static_cast<std::int64_t>(db.metrics(only_run().id).size());
  }
};

/// Starts a long run of the tiny spec against `server`, waits until it trains and has shipped.
std::unique_ptr<Background> start_long_run(const Node& node, const PrivateServer& server,
                                           std::vector<std::string> extra = {}) {
  std::vector<std::string> run = {"-q", "run", test::cli::tiny_spec(), "--set", "train.max_steps=100000000"};
  run.insert(run.end(), extra.begin(), extra.end());
  auto expctl = std::make_unique<Background>(node.args(server.conninfo, run), node.dir / "run");
  REQUIRE(eventually([&] {
    try {
      return server.count(store::testing::postgres_points_sql()) > 0;
    } catch (const std::exception&) {
      return false;
    }
  }));
  return expctl;
}

}  // namespace

TEST_CASE(
    "cli ship faults: the server stopped and back before the run ends: the run's exit ships the rest, the "
    "server is exact when expctl returns",
    "[cli][postgres][fault]") {
  if (!test::test_postgres())
    return;
  const PrivateServer server;
  const Node node;
  auto expctl = start_long_run(node, server);
  server.stop();
  // Long enough for the shipper's backoff to grow (1, 2, 4, 8 s) past what is left of the run.
  std::this_thread::sleep_for(std::chrono::seconds(9));
  server.start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  REQUIRE(::kill(expctl->pid(), SIGINT) == 0);  // the run ends 1 s after the server is back
  const int code = expctl->wait();
  const auto exited = std::chrono::steady_clock::now();
  INFO(expctl->err());
  CHECK(code == 130);
  // Exact right after the exit: before, the exit made no last pass while the backoff waited, and
  // the server held a part of the points and read the run as lost until someone typed sync.
  const auto run = node.only_run();
  CHECK(server.count(store::testing::postgres_points_sql()) == node.points());
  CHECK(store::testing::query_postgres(server.conninfo, "SELECT status FROM runs") == "interrupted");
  WARN(fmt::format("the server was exact {:.1f} s after the run's exit",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - exited).count()));
  CHECK_FALSE(store::has_pending(node.local));
  CHECK(run.status == store::RunStatus::interrupted);
}

TEST_CASE(
    "cli ship faults: the server away when the run ends: one line, under -q too, says how many points are "
    "not on it and what ships them, and the next reading command ships them in the background",
    "[cli][postgres][fault]") {
  if (!test::test_postgres())
    return;
  const PrivateServer server;
  const Node node;
  auto expctl = start_long_run(node, server, {"--ship-wait", "1"});
  server.stop();
  REQUIRE(::kill(expctl->pid(), SIGINT) == 0);
  const int code = expctl->wait();
  INFO(expctl->err());
  CHECK(code == 130);  // the run's own exit code
  const std::int64_t points = node.points();
  CHECK_THAT(expctl->err(), Catch::Contains(fmt::format("up to {} point(s) of 1 run(s) recorded in", points)) &&
                                Catch::Contains("are not on the team store yet (it is away") &&
                                Catch::Contains("ships them in the background") && Catch::Contains("expctl sync"));
  CHECK(store::has_pending(node.local));

  server.start();
  // A reading command, as a teammate on that node would type next: it answers, and ships beside.
  std::vector<std::string> list = node.args(server.conninfo, {"list"});
  list.erase(list.begin());
  const auto listed = run_expctl(list);
  INFO(listed.err);
  CHECK(listed.exit_code == 0);
  CHECK(eventually([&] { return !store::has_pending(node.local); }, std::chrono::seconds(60)));
  CHECK(server.count(store::testing::postgres_points_sql()) == points);
  CHECK(store::testing::query_postgres(server.conninfo, "SELECT status FROM runs") == "interrupted");
}

TEST_CASE(
    "cli ship faults: a resume refused after LibTorch started loading exits 2, every time, never a crash on "
    "the way out",
    "[cli][resume][fault]") {
  const test::cli::RunDir dir;
  const auto ran = dir.expctl({"run", test::cli::tiny_spec(), "--set", "train.max_steps=3"});
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  const auto run = dir.open().list_runs().front();
  // An interrupted run without a checkpoint: resume loads LibTorch (the preload), then refuses.
  store::testing::execute_sql(dir.db, "UPDATE runs SET status = 'interrupted' WHERE id = '" + run.id + "'");
  fs::remove_all(run.run_dir / "checkpoints");
  fs::create_directories(run.run_dir / "checkpoints");
  // The refusal came while LibTorch was still loading on another thread, and exit destroyed
  // LibTorch's static objects under it: SIGSEGV (139) or an abort (134), some of the time.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto resumed = dir.expctl({"resume", run.id});
    INFO("attempt " << attempt << ": " << resumed.err);
    CHECK(resumed.exit_code == 2);
    CHECK_THAT(resumed.err, Catch::Contains("it has no checkpoint"));
    CHECK_THAT(resumed.err, !Catch::Contains("INTERNAL ASSERT") && !Catch::Contains("Segmentation"));
  }
}

namespace {

/// The lines of docs/store.md's code block that follows the HTML comment starting with `marker`.
std::vector<std::string> docs_block(const std::string& marker) {
  std::ifstream in(test::source_dir() / "docs" / "store.md");
  std::vector<std::string> lines;
  std::string line;
  bool found = false;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!found) {
      found = line.starts_with("<!-- " + marker);
      continue;
    }
    if (line.starts_with("```")) {
      if (inside) {
        return lines;
      }
      inside = true;
      continue;
    }
    if (inside) {
      lines.push_back(line);
    }
  }
  FAIL("docs/store.md has no code block after <!-- " << marker);
  return {};
}

/// A node store holding one completed run of 100 points.
void record_one_run(const fs::path& local) {
  auto db = store::Store::open(local.string());
  const std::string hash = util::sha256_hex("service spec");
  db.put_spec(hash, R"({"name":"quickstart"})", "quickstart");
  const auto run = db.create_run({hash, std::nullopt, "quickstart", std::nullopt});
  std::vector<store::MetricPoint> points;
  for (int step = 1; step <= 100; ++step) {
    points.push_back({0, step, "loss", 1.0 / step});
  }
  db.append_metrics(run.id, points);
  db.finish_run(run.id, store::RunStatus::completed, 0, "");
}

/// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace

TEST_CASE(
    "cli ship faults: docs/store.md's systemd unit runs sync --follow that ships a node and stops cleanly on "
    "SIGTERM",
    "[cli][postgres][docs]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  const Node node;
  record_one_run(node.local);
  const auto unit = docs_block("expctl-sync.service");
  std::vector<std::string> environment;
  std::string exec_start;
  std::vector<int> success = {0};
  for (const std::string& line : unit) {
    if (line.starts_with("Environment=EXPCTL_DB=")) {
      environment.push_back("EXPCTL_DB=" + server.location);
    } else if (line.starts_with("Environment=EXPCTL_LOCAL_DB=")) {
      environment.push_back("EXPCTL_LOCAL_DB=" + node.local.string());
    } else if (line.starts_with("ExecStart=")) {
      exec_start = replaced(line.substr(10), "/usr/local/bin/expctl", test::expctl_binary());
    } else if (line.starts_with("SuccessExitStatus=")) {
      success.push_back(std::stoi(line.substr(18)));
    }
  }
  REQUIRE(environment.size() == 2);
  REQUIRE(exec_start.starts_with(test::expctl_binary() + " "));
  const bool can_verify = std::system("command -v systemd-analyze > /dev/null 2>&1") == 0;
  if (can_verify) {
    const test::TempDir units;
    std::ofstream(units / "expctl-sync.service")
        << replaced(util::join(unit, "\n"), "/usr/local/bin/expctl", test::expctl_binary()) << '\n';
    const auto verified =
        util::run_capture({"systemd-analyze", "verify", "--man=no", (units / "expctl-sync.service").string()});
    REQUIRE(verified.has_value());
    INFO(verified->err);
    CHECK(verified->exit_code == 0);
    CHECK(verified->err.empty());  // an unknown key is only a warning there
  }
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), environment.begin(), environment.end());
  for (const auto& word : util::split(exec_start, ' ')) {
    argv.push_back(word);
  }
  Background service(argv, node.dir / "service");
  CHECK(eventually([&] {
    try {
      return store::testing::query_postgres(server.location, store::testing::postgres_points_sql()) == "100";
    } catch (const std::exception&) {
      return false;
    }
  }));
  REQUIRE(::kill(service.pid(), SIGTERM) == 0);
  const int code = service.wait();
  INFO(service.err());
  CHECK(std::find(success.begin(), success.end(), code) != success.end());
  // A part left out is a skip, said after the rest has run (and can fail): never a pass.
  if (!can_verify) {
    test::skip("systemd-analyze",
               "systemd-analyze (package systemd) is not installed: the unit's syntax was not "
               "verified, its command was run");
  }
}

TEST_CASE("cli ship faults: docs/store.md's cron line ships a node in one pass", "[cli][postgres][docs]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  const Node node;
  record_one_run(node.local);
  const auto cron = docs_block("expctl-sync cron");
  REQUIRE(cron.size() == 1);
  const auto fields = util::split(cron.front(), ' ');
  REQUIRE(fields.size() > 6);
  CHECK(fields[0] == "*/5");  // every 5 minutes, as the text says
  // The command after the five schedule fields, as cron hands it to /bin/sh.
  std::string command = cron.front();
  for (int field = 0; field < 5; ++field) {
    command = command.substr(command.find(' ') + 1);
  }
  command = replaced(command, "/usr/local/bin/expctl", test::expctl_binary());
  command = replaced(command, "postgresql://expctl_writer@db.example/expctl", "\"" + server.location + "\"");
  command = replaced(command, "/srv/ml/results/expctl.db", node.local.string());
  const auto ran = util::run_capture({"/bin/sh", "-c", command});
  REQUIRE(ran.has_value());
  INFO(command << "\n" << ran->err);
  CHECK(ran->exit_code == 0);
  CHECK(ran->err.empty());  // cron mails whatever it prints: a pass that works prints nothing
  CHECK(store::testing::query_postgres(server.location, store::testing::postgres_points_sql()) == "100");
}

TEST_CASE(
    "cli ship faults: no password found, and a database the server does not have, are one line with exit 2 "
    "naming the fix",
    "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  const test::TempDir home;
  std::ofstream(home / "pgpass") << "";  // an empty password file: nothing for this server
  fs::permissions(home / "pgpass", fs::perms::owner_read | fs::perms::owner_write);
  // expctl_pw logs in only with a password (scripts/pg-throwaway.sh); none is given or found.
  const auto no_password = run_expctl({"list"}, {{"EXPCTL_DB", server.location + " user=expctl_pw"},
                                                 {"PGPASSFILE", (home / "pgpass").string()},
                                                 {"PGPASSWORD", std::nullopt}});
  INFO(no_password.err);
  CHECK(no_password.exit_code == 2);
  CHECK_THAT(no_password.err,
             Catch::Contains("the server asks for a password and none was found") && Catch::Contains("~/.pgpass"));
  CHECK(std::count(no_password.err.begin(), no_password.err.end(), '\n') == 1);

  const auto no_database = run_expctl({"list"}, {{"EXPCTL_DB", server.location + " dbname=expctl_no_such_db"}});
  INFO(no_database.err);
  CHECK(no_database.exit_code == 2);
  CHECK_THAT(no_database.err, Catch::Contains("expctl_no_such_db") && Catch::Contains("does not exist") &&
                                  Catch::Contains("check the host, port, database"));
  CHECK(std::count(no_database.err.begin(), no_database.err.end(), '\n') == 1);
}

namespace {

/// Seconds a stop may take here, stretched by EXPCTL_TEST_TIMEOUT_SCALE (the asan preset: 4).
std::chrono::seconds stop_limit(int seconds) {
  const char* text = std::getenv("EXPCTL_TEST_TIMEOUT_SCALE");
  return std::chrono::seconds(seconds * (text != nullptr && std::atoi(text) > 1 ? std::atoi(text) : 1));
}

/// How long `expctl` takes from `signal` to its exit, and its exit code.
std::pair<int, double> stop_with(Background& expctl, int signal) {
  const auto sent = std::chrono::steady_clock::now();
  REQUIRE(::kill(expctl.pid(), signal) == 0);
  const int code = expctl.wait(stop_limit(3));
  return {code, std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count()};
}

/// The server's metric points; -1 before it has the tables.
std::int64_t server_points(const PrivateServer& server) {
  try {
    return server.count(store::testing::postgres_points_sql());
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

// Before, sync --follow slept between passes with sleep_for, which libstdc++ restarts after
// EINTR: Ctrl-C waited out the pause, here an hour. It is now the run's shipper in its foreground
// mode, whose wait the signal ends.
TEST_CASE(
    "cli ship faults: sync --follow --interval 3600 stops within seconds of SIGINT with exit 130 and says "
    "what it shipped",
    "[cli][postgres][sync]") {
  if (!test::test_postgres())
    return;
  const PrivateServer server;
  const Node node;
  record_one_run(node.local);
  Background follow(node.args(server.conninfo, {"sync", "--follow", "--interval", "3600"}), node.dir / "follow");
  REQUIRE(eventually([&] { return server_points(server) == 100; }));
  REQUIRE(
      eventually([&] { return follow.err().find("expctl: shipped 100 point(s) of 1 run(s)") != std::string::npos; }));
  const auto [code, took] = stop_with(follow, SIGINT);
  INFO(follow.err());
  CHECK(code == 130);
  CHECK(took < static_cast<double>(stop_limit(3).count()));
  CHECK_THAT(follow.err(), Catch::Contains("expctl: sync --follow stopped: 100 point(s) shipped to "));
}

TEST_CASE(
    "cli ship faults: sync --follow with the server away stops within seconds of SIGINT, not after its "
    "backoff, with exit 130",
    "[cli][postgres][sync]") {
  if (!test::test_postgres())
    return;
  const PrivateServer server;
  const Node node;
  record_one_run(node.local);
  Background follow(node.args(server.conninfo, {"sync", "--follow", "--interval", "0.2"}), node.dir / "follow");
  REQUIRE(eventually([&] { return server_points(server) == 100; }));
  server.stop();
  REQUIRE(eventually([&] { return follow.err().find("cannot ship now") != std::string::npos; }));
  // Passes failed at 0, 1 and 3 s of backoff: the next waits until 7 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  const auto [code, took] = stop_with(follow, SIGINT);
  INFO(follow.err());
  CHECK(code == 130);
  CHECK(took < 2.0 * static_cast<double>(stop_limit(1).count()));
  CHECK_THAT(follow.err(), Catch::Contains("retrying with backoff up to 30 s") &&
                               Catch::Contains("expctl: sync --follow stopped: 100 point(s) shipped to "));
}
