// `expctl merge` through the real binary: stores written through the store API stand for those
// of other machines; the merged one is checked with SQLite's own integrity check.

#include <map>
#include <set>

#include "run_helpers.hpp"
#include "unit/store/backend_fixture.hpp"
#include <sqlite3.h>

#include "expctl/store/testing.hpp"
#include "expctl/util/sha256.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

// A completed run with two ranks, a few metrics and a tag.
std::string add_run(const fs::path& db_path, const std::string& name) {
  auto db = store::Store::open(db_path);
  const std::string spec = util::sha256_hex(name);
  db.put_spec(spec, R"({"spec":")" + name + R"("})", name);
  db.put_environment("env", R"({"fingerprint_version":1,"fields":{}})");
  const auto run = db.create_run({spec, std::string("env"), name, std::nullopt});
  for (int rank = 0; rank < 2; ++rank) {
    db.add_rank(run.id, {.rank = rank, .host = "node", .pid = 100 + rank});
  }
  db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 1, "loss", 2.0}, {1, 1, "loss", 2.1}});
  db.add_tag(run.id, "sweep:demo");
  db.set_summary(run.id, R"({"final_train_loss":2.0})");
  db.finish_run(run.id, store::RunStatus::completed, 0, "");
  return run.id;
}

std::string sqlite_integrity(const fs::path& db_path) {
  sqlite3* handle = nullptr;
  std::string result;
  if (sqlite3_open_v2(db_path.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_exec(
        handle, "PRAGMA integrity_check",
        [](void* out, int, char** values, char**) {
          *static_cast<std::string*>(out) += values[0] != nullptr ? values[0] : "null";
          return 0;
        },
        &result, nullptr);
  }
  sqlite3_close(handle);
  return result;
}

std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[entry.path().string()] = util::sha256_file(entry.path()).value_or("?");
    }
  }
  return files;
}

}  // namespace

TEST_CASE("cli merge: disjoint runs and a shared one end in one store, again is a no-op, a conflict is refused") {
  const test::TempDir dir;
  const fs::path common = dir / "common" / "expctl.db";
  const fs::path a = dir / "a" / "task-0.db";
  const fs::path b = dir / "b" / "task-1.db";
  const fs::path into = dir / "merged" / "expctl.db";
  const std::string shared = add_run(common, "shared");
  for (const auto& store_path : {a, b}) {
    REQUIRE(test::run_expctl({"merge", common.string(), "--into", store_path.string(), "--runs-dir"}).exit_code == 0);
  }
  const std::string only_a = add_run(a, "only-a");
  const std::string only_b = add_run(b, "only-b");
  const auto sources_before = files_of(dir / "a");

  const auto merged = test::run_expctl({"merge", a.string(), b.string(), "--into", into.string(), "--runs-dir",
                                        "--format", "json"});
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  const json document = parse_stdout(merged);
  CHECK(document["kind"] == "merge");
  CHECK(document["integrity"] == "ok");
  CHECK(document["sources"][0]["added"].size() == 2);
  CHECK(document["sources"][1]["added"] == json{only_b});
  CHECK(document["sources"][1]["present"] == json{shared});
  CHECK(document["sources"][0]["folders_copied"].size() == 2);
  CHECK(sqlite_integrity(into) == "ok");
  CHECK(files_of(dir / "a") == sources_before);
  {
    const auto db = store::Store::open(into, store::OpenMode::read_only);
    CHECK(db.list_runs().size() == 3);
    CHECK(db.metrics(only_a).size() == 2);
    CHECK(db.ranks(only_b).size() == 2);
    CHECK(fs::exists(store::runs_root(into) / only_a / "spec.json"));
  }
  const auto listed = test::run_expctl({"--db", into.string(), "list", "--format", "json"});
  CHECK(listed.exit_code == 0);

  const auto again = test::run_expctl({"merge", a.string(), b.string(), "--into", into.string()});
  CHECK(again.exit_code == 0);
  CHECK(again.err == "merged " + a.string() + ": 0 run(s) added, 2 already present\n" + "merged " + b.string() +
                         ": 0 run(s) added, 2 already present\n");
  CHECK(again.out == into.string() + ": integrity ok\n");

  store::testing::execute_sql(b, "UPDATE runs SET summary = '{\"final_train_loss\":9}' WHERE id = '" + shared + "'");
  const auto conflict = test::run_expctl({"merge", b.string(), "--into", into.string()});
  CHECK(conflict.exit_code == 2);
  CHECK_THAT(conflict.err, Catch::StartsWith("expctl: error: " + b.string() + ": run " + shared +
                                             " is in both with different content (summary: "));
  CHECK(store::Store::open(into, store::OpenMode::read_only).list_runs().size() == 3);
  CHECK(sqlite_integrity(into) == "ok");
}

TEST_CASE("cli merge: a missing source or no --into is a usage error") {
  const test::TempDir dir;
  const auto missing = test::run_expctl({"merge", (dir / "none.db").string(), "--into", (dir / "x.db").string()});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("none.db: no such database: check the path"));
  CHECK(test::run_expctl({"merge", (dir / "none.db").string()}).exit_code == 2);
}

TEMPLATE_TEST_CASE("merge: --format json has one shape whether DST is a SQLite file or a PostgreSQL server",
                   "[cli][merge][postgres]", test::OnSqlite, test::OnPostgres) {
  test::BackendStore into(TestType::kind);
  if (!into.available)
    return;
  test::TempDir dir;
  const fs::path source = dir / "a.db";
  const std::string id = add_run(source, "a");
  const auto merge = [&] {
    const auto merged = test::run_expctl({"merge", source.string(), "--into", into.location, "--format", "json"});
    INFO(merged.err);
    REQUIRE(merged.exit_code == 0);
    return parse_stdout(merged);
  };
  const json first = merge();
  CHECK(first["kind"] == "merge");
  CHECK(first.contains("into"));
  // integrity: SQLite's PRAGMA integrity_check; a server has none (null).
  CHECK(first["integrity"] == (TestType::kind == store::StoreKind::sqlite ? json("ok") : json(nullptr)));
  REQUIRE(first["sources"].size() == 1);
  const json& shape = first["sources"][0];
  std::set<std::string> keys;
  for (const auto& item : shape.items()) {
    keys.insert(item.key());
  }
  CHECK(keys == std::set<std::string>{"source", "added", "present", "specs_added", "environments_added", "tags_added",
                                      "points_added", "folders_copied", "folders_missing"});
  CHECK(shape["source"] == source.string());
  CHECK(shape["added"] == json{id});
  CHECK(shape["present"] == json::array());
  CHECK(shape["specs_added"] == 1);
  CHECK(shape["environments_added"] == 1);
  CHECK(shape["tags_added"] == 1);
  CHECK(shape["points_added"] == 2);
  CHECK(shape["folders_copied"] == json::array());
  CHECK(shape["folders_missing"] == json::array());
  const json again = merge()["sources"][0];
  CHECK(again["added"] == json::array());
  CHECK(again["present"] == json{id});
  CHECK(again["points_added"] == 0);
}
