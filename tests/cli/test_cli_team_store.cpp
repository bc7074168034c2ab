// A team's PostgreSQL store through the real binary: reading commands against it, `sync` and
// `merge --into` (idempotent), and the faults a user meets (unreachable server, wrong password),
// each one line with exit 2, with a run recorded locally unaffected.
#include <catch2/catch.hpp>

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

}  // namespace

TEST_CASE("cli team store: sync ships a node's store once, list/show/compare read it, and sync or merge again "
          "changes nothing",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const test::TempDir node;
  const fs::path local = node / "results" / "expctl.db";
  const auto ids = record_local(local);
  const std::map<std::string, std::optional<std::string>> env{{"EXPCTL_DB", server.location}};

  const auto first = run_expctl({"sync", "--from", local.string()}, env);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.out, Catch::Contains("shipped 200 point(s) of 2 run(s) in 2 batch(es)") &&
                            Catch::Contains("is up to date with"));

  const auto list = run_expctl({"list", "--format", "json"}, env);
  REQUIRE(list.exit_code == 0);
  const auto document = nlohmann::json::parse(list.out);
  CHECK(document["runs"].size() == 2);
  CHECK(document["database"].get<std::string>().starts_with("postgresql://postgres@"));
  const auto show = run_expctl({"show", ids[0]}, env);
  REQUIRE(show.exit_code == 0);
  CHECK_THAT(show.out, Catch::Contains("baseline") && Catch::Contains("loss"));
  const auto compare = run_expctl({"compare", "tag:baseline", ids[1]}, env);
  INFO(compare.err);
  CHECK((compare.exit_code == 0 || compare.exit_code == 3));
  CHECK_THAT(compare.out, Catch::Contains("step_time_ms"));

  const auto again = run_expctl({"sync", "--from", local.string()}, env);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("shipped 0 point(s) of 0 run(s) in 0 batch(es)"));
  const auto merged = run_expctl({"merge", local.string(), "--into", server.location});
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  CHECK_THAT(merged.err, Catch::Contains("0 run(s) shipped (2 already there whole), 0 point(s) sent"));
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM metrics") == "200");
}

TEST_CASE("cli team store: an unreachable server or a wrong password is one line with exit 2, and never shows the "
          "password",
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

  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const auto wrong = run_expctl({"list"}, {{"EXPCTL_DB", server.location + " user=expctl_pw password=pw-XYZZY"}});
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("the server refused the login") && Catch::Contains("~/.pgpass"));
  CHECK(wrong.err.find("XYZZY") == std::string::npos);
  CHECK(std::count(wrong.err.begin(), wrong.err.end(), '\n') == 1);

  const auto sqlite = run_expctl({"--db", (nowhere / "x.db").string(), "sync"});
  CHECK(sqlite.exit_code == 2);
  CHECK_THAT(sqlite.err, Catch::Contains("sync sends a node's store to a team server"));
}

TEST_CASE("cli team store: with the server unreachable a run trains and records locally, says so once, and "
          "sync ships it later",
          "[cli][postgres]") {
  test::BackendStore server(store::StoreKind::postgresql);
  if (!server.available) return;
  const test::TempDir node;
  const fs::path local = node / "results" / "expctl.db";
  const test::TempDir nowhere;
  const std::string unreachable = "host=" + nowhere.path().string() + " dbname=team user=alice";
  const auto run = run_expctl({"--db", unreachable, "--local-db", local.string(), "--runs-dir",
                               (node / "results" / "runs").string(), "run", test::cli::tiny_spec(), "--set",
                               "train.max_steps=5"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.err, Catch::Contains("expctl: note: cannot ship to the team store now") &&
                          Catch::Contains("training goes on"));
  CHECK(std::count(run.err.begin(), run.err.end(), '\n') >= 1);
  auto db = store::Store::open(local.string(), store::OpenMode::read_only);
  REQUIRE(db.list_runs().size() == 1);
  CHECK(db.list_runs().front().status == store::RunStatus::completed);

  const auto sync = run_expctl({"--db", server.location, "--local-db", local.string(), "sync"});
  INFO(sync.err);
  REQUIRE(sync.exit_code == 0);
  CHECK_THAT(sync.out, Catch::Contains("is up to date with"));
  const auto status = run_expctl({"--db", server.location, "--local-db", local.string(), "sync", "--status"});
  CHECK_THAT(status.out, Catch::Contains("is up to date with"));
  CHECK(store::testing::query_postgres(server.location, "SELECT count(*) FROM metrics") ==
        std::to_string(db.metrics(db.list_runs().front().id).size()));
}
