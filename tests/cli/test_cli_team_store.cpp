// A team's PostgreSQL store through the real binary: reading commands against it, `sync` and
// `merge --into` (idempotent), how far the server is behind a node (list, show), a SELECT-only
// role, and the faults a user meets (unreachable server, wrong password, TLS required either way
// round), each one line with exit 2, with a run recorded locally unaffected.
#include <csignal>
#include <random>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "expctl/util/subprocess.hpp"
#include "run_helpers.hpp"
#include "unit/store/backend_fixture.hpp"

using namespace expctl;
using test::run_expctl;
namespace fs = std::filesystem;

namespace {

const std::string k_hash = util::sha256_hex("team spec");

/// A node-local store with two completed runs, one tagged baseline.
std::vector<std::string> record_local(const fs::path& db_path) {
  auto db = store::Store::open(db_path.string());
  db.put_spec(k_hash, R"({"name":"quickstart"})", "quickstart");
  std::vector<std::string> ids;
  for (int r = 0; r < 2; ++r) {
    const auto run = db.create_run({k_hash, std::nullopt, "quickstart", std::nullopt});
    db.add_rank(run.id, {.rank = 0, .host = "node1", .status = store::RunStatus::completed, .exit_code = 0});
    std::vector<store::MetricPoint> points;
    for (int step = 1; step <= 50; ++step) {
      points.push_back({0, step, "loss", 1.0 / step});
      points.push_back({0, step, "step_time_ms", 10.0 + r});
    }
    db.append_metrics(run.id, points);
    db.set_summary(run.id, R"({"final_train_loss":0.02})");
    db.finish_run(run.id, store::RunStatus::completed, 0, "");
    ids.push_back(run.id);
  }
  db.add_tag(ids[0], "baseline");
  return ids;
}

/// A node whose local store holds record_local's two runs.
struct Node {
  test::TempDir dir;
  fs::path local = dir / "results" / "expctl.db";
  std::vector<std::string> ids = record_local(local);
};

using Env = std::map<std::string, std::optional<std::string>>;

/// list, show and compare read a node's two runs from the server `env` names.
void check_reads(const Env& env, const std::vector<std::string>& ids) {
  const auto list = run_expctl({"list", "--format", "json"}, env);
  INFO(list.err);
  REQUIRE(list.exit_code == 0);
  CHECK(nlohmann::json::parse(list.out)["runs"].size() == 2);
  const auto show = run_expctl({"show", ids[0]}, env);
  INFO(show.err);
  CHECK(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains("baseline") && Catch::Contains("loss") && Catch::Contains("shipped"));
  const auto compare = run_expctl({"compare", "tag:baseline", ids[1]}, env);
  INFO(compare.err);
  CHECK((compare.exit_code == 0 || compare.exit_code == 3));
  CHECK_THAT(compare.out, Catch::Contains("step_time_ms"));
}

/// A run with `away` as --db (a server it cannot ship to) trains and records in its node's local
/// store, saying once why it cannot ship (`why`); then `sync` to `server` ships it whole.
void run_then_sync(const std::string& away, const std::string& why, const std::string& server) {
  const test::TempDir node;
  const fs::path local = node / "results" / "expctl.db";
  const auto run = run_expctl({"--db", away, "--local-db", local.string(), "--runs-dir",
                               (node / "results" / "runs").string(), "run", test::cli::tiny_spec(), "--set",
                               "train.max_steps=5"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err, Catch::Contains("expctl: note: cannot ship to the team store now") && Catch::Contains(why) &&
                          Catch::Contains("training goes on"));
  // Once, however many shipping passes failed while it trained.
  const std::string note = "cannot ship to the team store now";
  std::size_t notes = 0;
  for (auto at = run.err.find(note); at != std::string::npos; at = run.err.find(note, at + 1)) {
    ++notes;
  }
  CHECK(notes == 1);
  auto db = store::Store::open(local.string(), store::OpenMode::read_only);
  REQUIRE(db.list_runs().size() == 1);
  CHECK(db.list_runs().front().status == store::RunStatus::completed);

  const auto sync = run_expctl({"--db", server, "--local-db", local.string(), "sync"});
  INFO(sync.err);
  REQUIRE(sync.exit_code == 0);
  CHECK_THAT(sync.out, Catch::Contains("is up to date with"));
  const auto status = run_expctl({"--db", server, "--local-db", local.string(), "sync", "--status"});
  CHECK_THAT(status.out, Catch::Contains("is up to date with"));
  CHECK(store::testing::query_postgres(server, store::testing::postgres_points_sql()) ==
        std::to_string(db.metrics(db.list_runs().front().id).size()));
}

}  // namespace

TEST_CASE("cli team store: serve over a server named with a password prints it masked", "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const Node node;
  REQUIRE(run_expctl({"sync", "--from", node.local.string()}, {{"EXPCTL_DB", server.location}}).exit_code == 0);
  test::TempDir dir;
  // The test server trusts local logins, so the password is only carried, never checked.
  const std::string with_password = server.location + " password=hunter2-serve";
  test::cli::Background serve({test::expctl_binary(), "--db", with_password, "serve", "--port", "0"}, dir / "serve");
  REQUIRE(test::cli::eventually([&] { return serve.out().find("Ctrl-C stops it") != std::string::npos; }));
  INFO(serve.out());
  CHECK_THAT(serve.out(), Catch::StartsWith("expctl serve: postgresql://postgres@"));
  CHECK(serve.out().find("hunter2") == std::string::npos);
  CHECK(serve.err().find("hunter2") == std::string::npos);
  ::kill(serve.pid(), SIGINT);
  CHECK(serve.wait() == 0);
}

TEST_CASE("cli team store: sync on a new node with no store yet readies the server and ships nothing, --follow "
          "waits for the store, and a --from naming no file is refused",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  test::TempDir dir;
  const fs::path local = dir / "results" / "expctl.db";
  const Env env{{"EXPCTL_DB", server.location}, {"EXPCTL_LOCAL_DB", local.string()}};

  // The README's first step on a node: nothing recorded here yet. The server's tables are made.
  const auto first = run_expctl({"sync"}, env);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("nothing to ship: this node has no store at " + local.string() + " yet"));
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM runs") == "0");
  CHECK(!fs::exists(local));
  const auto status = run_expctl({"sync", "--status", "--format", "json"}, env);
  REQUIRE(status.exit_code == 0);
  CHECK(nlohmann::json::parse(status.out)["runs_behind"] == 0);

  const auto typo = run_expctl({"sync", "--from", (dir / "nodes.db").string()}, env);
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("--from " + (dir / "nodes.db").string() + ": no such database: check the path"));

  // --follow started before the node's first run ships the runs once the store appears.
  test::cli::Background follow({test::expctl_binary(), "--db", server.location, "--local-db", local.string(), "sync",
                           "--follow", "--interval", "0.2"},
                          dir / "follow");
  REQUIRE(test::cli::eventually([&] { return follow.err().find("waiting for " + local.string()) != std::string::npos; }));
  record_local(local);
  CHECK(test::cli::eventually(
      [&] { return store::testing::query_postgres(server.location, store::testing::postgres_points_sql()) == "200"; }));
  ::kill(follow.pid(), SIGINT);
  CHECK(follow.wait() == 130);
}

TEST_CASE("cli team store: a server no run has reached yet lists no runs, and a sweep runs every point into it",
          "[cli][postgres]") {
  // Was: `sweep` planned against the server read-only and was refused ("holds no expctl store
  // yet"), though `run` against the same server made the store.
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  test::TempDir dir;
  const fs::path local = dir / "results" / "expctl.db";
  const Env env{{"EXPCTL_DB", server.location},
                {"EXPCTL_LOCAL_DB", local.string()},
                {"EXPCTL_RUNS_DIR", (dir / "results" / "runs").string()}};
  const auto list = run_expctl({"list"}, env);
  INFO(list.err);
  CHECK(list.exit_code == 0);
  CHECK_THAT(list.out, Catch::StartsWith("no runs: the team server (--db, EXPCTL_DB) holds no expctl store yet: "
                                         "'expctl run' records the first run there"));
  const auto listed = run_expctl({"list", "--format", "json"}, env);
  REQUIRE(listed.exit_code == 0);
  CHECK(nlohmann::json::parse(listed.out)["runs"].empty());

  const fs::path sweep_file = dir / "lr.yaml";
  {
    std::ofstream out(sweep_file);
    out << "base: " << test::cli::tiny_spec()
        << "\nname: lr\nset:\n  train.max_steps: 5\ngrid:\n  optim.lr: [0.01, 0.1]\n";
  }
  const auto swept = run_expctl({"sweep", sweep_file.string()}, env);
  INFO(swept.out << swept.err);
  REQUIRE(swept.exit_code == 0);
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM runs WHERE status = 'completed'") == "2");
  // Planned against the server now: nothing left to run.
  const auto again = run_expctl({"sweep", sweep_file.string()}, env);
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out + again.err, Catch::Contains("nothing to run: all 2 runs are done"));
}

TEST_CASE("cli team store: sync ships a node's store once, list/show/compare read it, and sync or merge again "
          "changes nothing",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const Node node;
  const auto& [dir, local, ids] = node;
  const Env env{{"EXPCTL_DB", server.location}};

  const auto first = run_expctl({"sync", "--from", local.string()}, env);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("shipped 200 point(s) of 2 run(s) in 2 batch(es)") &&
                            Catch::Contains("is up to date with"));

  check_reads(env, ids);
  const auto document = nlohmann::json::parse(run_expctl({"list", "--format", "json"}, env).out);
  CHECK(document["database"].get<std::string>().starts_with("postgresql://postgres@"));

  const auto again = run_expctl({"sync", "--from", local.string()}, env);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("shipped 0 point(s) of 0 run(s) in 0 batch(es)"));
  const auto merged = run_expctl({"merge", local.string(), "--into", server.location});
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  CHECK_THAT(merged.err, Catch::Contains("0 run(s) shipped (2 already there whole), 0 point(s) sent"));
  CHECK(store::testing::query_postgres(server.location, store::testing::postgres_points_sql()) == "200");
}

// Needs no server, so it runs (and can fail) everywhere; the wrong password, which needs one, is the
// next case: a failure here is never reported as that one's skip.
TEST_CASE("cli team store: an unreachable server is one line with exit 2, and never shows the password",
          "[cli][postgres]") {
  const test::TempDir nowhere;
  const std::string unreachable = "host=" + nowhere.path().string() + " dbname=team user=alice password=pw-XYZZY";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list"}, {"show", "x"}, {"sync", "--from", (nowhere / "none.db").string()}}) {
    INFO(args.front());
    const auto result = run_expctl(args, {{"EXPCTL_DB", unreachable}});
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Catch::StartsWith("expctl: error: postgresql://alice@" + nowhere.path().string()) ||
                               Catch::Contains("no such database"));
    CHECK(result.err.find("XYZZY") == std::string::npos);
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  }
  const auto list = run_expctl({"list"}, {{"EXPCTL_DB", unreachable}});
  CHECK_THAT(list.err, Catch::Contains("cannot connect to the PostgreSQL server") &&
                           Catch::EndsWith("check the host, port, database and sslmode in --db / EXPCTL_DB and that "
                                           "the server runs\n"));

  const auto sqlite = run_expctl({"--db", (nowhere / "x.db").string(), "sync"});
  CHECK(sqlite.exit_code == 2);
  CHECK_THAT(sqlite.err, Catch::Contains("sync sends a node's store to a team server"));
}

TEST_CASE("cli team store: a wrong password is one line with exit 2, and never shows the password", "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const auto wrong = run_expctl({"list"}, {{"EXPCTL_DB", server.location + " user=expctl_pw password=pw-XYZZY"}});
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("the server refused the login") && Catch::Contains("~/.pgpass"));
  CHECK(wrong.err.find("XYZZY") == std::string::npos);
  CHECK(std::count(wrong.err.begin(), wrong.err.end(), '\n') == 1);
}

TEST_CASE("cli team store: with the server unreachable a run trains and records locally, says so once, and "
          "sync ships it later",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const test::TempDir nowhere;
  run_then_sync("host=" + nowhere.path().string() + " dbname=team user=alice", "cannot connect to the PostgreSQL server",
                server.location);
}

namespace {

/// A throwaway server of its own (scripts/pg-throwaway.sh) that takes TCP logins on 127.0.0.1 only
/// over TLS; stopped and deleted with the object.
struct TlsServer {
  std::string script = (test::source_dir() / "scripts" / "pg-throwaway.sh").string();
  // Not inside a TempDir (mode 0700, root's): the server runs as the postgres user.
  fs::path dir = fs::temp_directory_path() / fmt::format("expctl-pg-tls-{}-{}", ::getpid(), std::random_device{}());
  std::string conninfo;

  TlsServer() {
    const int port = 20000 + static_cast<int>(std::random_device{}() % 30000);
    auto started = util::run_capture({script, "start", dir.string()},
                                     {.env = {{"EXPCTL_PG_TLS_PORT", std::to_string(port)}},
                                      .timeout = std::chrono::minutes(2)});
    REQUIRE(started.has_value());
    INFO(started->err);
    REQUIRE(started->exit_code == 0);
    conninfo = started->out.substr(0, started->out.find('\n'));
  }
  ~TlsServer() { (void)util::run_capture({script, "stop", dir.string()}); }
  /// Starts the server again with ssl `on` or `off`.
  void restart(const char* ssl) const {
    const auto restarted = util::run_capture({script, "pg_ctl", dir.string(), "-o", std::string("-c ssl=") + ssl,
                                              "-l", (dir / "server.log").string(), "-w", "restart"});
    REQUIRE(restarted.has_value());
    REQUIRE(restarted->exit_code == 0);
  }
};

}  // namespace

TEST_CASE("cli team store: TLS required by the server, or by sslmode from a server without it, is one line with "
          "exit 2, and a run meanwhile trains and records locally",
          "[cli][postgres][fault]") {
  if (!test::test_postgres()) return;  // the server programs come with the test server's package
  const TlsServer server;
  const std::string plain = server.conninfo + " sslmode=disable";
  const std::string tls = server.conninfo + " sslmode=require";

  const auto refused = run_expctl({"list"}, {{"EXPCTL_DB", plain}});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::StartsWith("expctl: error: postgresql://postgres@127.0.0.1:") &&
                              Catch::Contains("the server takes this login only over TLS") &&
                              Catch::EndsWith("add sslmode=require (or verify-full with sslrootcert) to --db / "
                                              "EXPCTL_DB\n"));
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);

  // A run meanwhile trains locally; with sslmode=require the same server takes the login, and
  // sync ships what the run left, over TLS.
  run_then_sync(plain, "only over TLS", tls);
  CHECK(store::testing::query_postgres(tls, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == "t");

  // The other way round: sslmode=require against a server with TLS off.
  server.restart("off");
  const auto no_tls = run_expctl({"list"}, {{"EXPCTL_DB", tls}});
  CHECK(no_tls.exit_code == 2);
  CHECK_THAT(no_tls.err, Catch::Contains("the server offers no TLS but sslmode asks for it") &&
                             Catch::EndsWith("turn ssl on at the server (docs/store.md) or lower sslmode in --db / "
                                             "EXPCTL_DB\n"));
  CHECK(std::count(no_tls.err.begin(), no_tls.err.end(), '\n') == 1);
}

TEST_CASE("cli team store: list says how far the server is behind this node, show says who shipped a run and when",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const Node node;
  const auto& [dir, local, ids] = node;
  const std::vector<std::string> globals{"--db", server.location, "--local-db", local.string()};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), globals.begin(), globals.end());
    return run_expctl(args);
  };
  REQUIRE(with({"sync", "--run", ids[0]}).exit_code == 0);

  const auto behind = with({"list"});
  INFO(behind.err);
  REQUIRE(behind.exit_code == 0);
  CHECK_THAT(behind.out, Catch::EndsWith("this node's store " + local.string() + ": 1 run(s) and 100 point(s) not on "
                                         "the server yet ('expctl run' ships them while it trains, 'expctl sync' "
                                         "ships the rest)\n"));
  const auto lag = nlohmann::json::parse(with({"list", "--format", "json"}).out).at("node_lag");
  CHECK(lag == nlohmann::json{{"local", local.string()}, {"runs_behind", 1}, {"points_behind", 100}});
  const auto shown = with({"show", ids[0]});
  CHECK_THAT(shown.out, Catch::Matches("(.|\n)*\nshipped      from [^ ]+ at [0-9-]+ [0-9:]+ UTC, final state; this "
                                       "node has nothing more of it\n(.|\n)*"));
  const auto shown_json = nlohmann::json::parse(with({"show", ids[0], "--format", "json"}).out).at("shipped");
  CHECK(shown_json.at("complete") == true);
  CHECK(shown_json.at("local_points_behind") == 0);

  REQUIRE(with({"sync"}).exit_code == 0);
  CHECK_THAT(with({"list"}).out, Catch::EndsWith(": every run of it is on the server\n"));
  // Another node (no local store): show still says who shipped the run; list adds no line.
  const auto elsewhere = run_expctl({"--db", server.location, "--local-db", (dir / "none.db").string(), "show", ids[1]});
  CHECK_THAT(elsewhere.out, Catch::Contains("final state\n"));
  CHECK(nlohmann::json::parse(run_expctl({"--db", server.location, "--local-db", (dir / "none.db").string(), "list",
                                          "--format", "json"})
                                  .out)
            .at("node_lag")
            .is_null());
  // A SQLite store: no shipping field, no line.
  CHECK(run_expctl({"--db", local.string(), "show", ids[0]}).out.find("shipped") == std::string::npos);
}

TEST_CASE("cli team store: a role with SELECT only (a dashboard) runs list, show and compare, and is refused "
          "writing in one line",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const Node node;
  REQUIRE(run_expctl({"--db", server.location, "sync", "--from", node.local.string()}).exit_code == 0);
  const auto& ids = node.ids;

  // As docs/store.md says: the writer grants SELECT on the tables (and here USAGE on the test's schema).
  const std::string schema = store::testing::query_postgres(server.location, "SELECT current_schema()");
  const std::string role = "reader_" + schema;
  store::testing::execute_postgres_sql(server.location, "CREATE ROLE " + role + " LOGIN; GRANT USAGE ON SCHEMA " +
                                                            schema + " TO " + role +
                                                            "; GRANT SELECT ON ALL TABLES IN SCHEMA " + schema +
                                                            " TO " + role);
  struct DropRole {
    std::string location, role;
    ~DropRole() {
      try {
        store::testing::execute_postgres_sql(location, "DROP OWNED BY " + role + "; DROP ROLE " + role);
      } catch (const std::exception&) {
      }
    }
  } drop{server.location, role};
  const Env reader{{"EXPCTL_DB", server.location + " user=" + role}};

  check_reads(reader, ids);

  const auto tag = run_expctl({"baseline", "set", ids[0]}, reader);
  CHECK(tag.exit_code == 2);
  CHECK_THAT(tag.err, Catch::Contains("permission denied: this role may only read"));
  CHECK(std::count(tag.err.begin(), tag.err.end(), '\n') == 1);
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM tags") == "1");
}
