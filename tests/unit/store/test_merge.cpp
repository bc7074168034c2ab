// Merging stores: every row of every run comes along, merging twice changes nothing, a run id
// with different content is refused by name, and the sources are never written.

#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/sha256.hpp"
#include "store_fixture.hpp"

using namespace expctl;
using store::RunStatus;
using test::TempDir;

namespace {

namespace fs = std::filesystem;

const std::string k_env = R"({"fingerprint_version":1,"hash":"e","fields":{}})";

// A finished run with ranks, metrics, an artifact and tags, in `db`.
store::RunRecord add_run(store::Store& db, const std::string& spec_seed, const std::string& tag) {
  const std::string spec = test::fake_spec_hash(spec_seed);
  db.put_spec(spec, R"({"spec":")" + spec_seed + R"("})", spec_seed);
  db.put_environment("env-a", k_env);
  auto run = db.create_run({spec, std::string("env-a"), spec_seed, std::nullopt});
  db.add_rank(run.id, {.rank = 0, .host = "h", .pid = 10, .environment_hash = std::string("env-a")});
  db.add_rank(run.id, {.rank = 1, .host = "h", .pid = 11});
  db.update_rank(run.id, 0, RunStatus::completed, 0, std::nullopt);
  db.update_rank(run.id, 1, RunStatus::completed, 0, std::nullopt);
  const std::vector<store::MetricPoint> points{{0, 1, "loss", 2.5}, {0, 2, "loss", 1.5}, {1, 1, "loss", 2.4},
                                              {0, 2, "samples_per_sec", std::nan("")}};
  db.append_metrics(run.id, points);
  db.add_artifact(run.id, {"checkpoints/rank0-step2.pt", std::string(64, 'a'), 123});
  db.add_tag(run.id, tag);
  db.set_summary(run.id, R"({"final_train_loss":1.5})");
  db.finish_run(run.id, RunStatus::completed, 0, "");
  std::ofstream(run.run_dir / "logs" / "rank-0.log") << "step 1\n";
  return *db.run(run.id);
}

// Everything a run is, as one comparable text.
std::string content_of(const store::Store& db, const std::string& id) {
  const auto run = db.run(id);
  REQUIRE(run);
  std::string text = fmt::format("{} {} {} {} {} {} {}\n", run->spec_hash, run->environment_hash.value_or("-"),
                                 run->name, store::to_string(run->status), run->started_at, run->ended_at.value_or("-"),
                                 run->summary_json);
  for (const auto& rank : db.ranks(id)) {
    text += fmt::format("rank {} {} {} {}\n", rank.rank, rank.host, rank.pid.value_or(-1), store::to_string(rank.status));
  }
  for (const auto& point : db.metrics(id)) {
    text += fmt::format("metric {} {} {} {}\n", point.name, point.rank, point.step, point.value);
  }
  for (const auto& artifact : db.artifacts(id)) {
    text += fmt::format("artifact {} {} {}\n", artifact.path, artifact.sha256, artifact.size_bytes);
  }
  return text;
}

// The bytes of every file in `dir`, to prove a source was not touched.
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[entry.path().string()] = util::sha256_file(entry.path()).value_or("?");
    }
  }
  return files;
}

struct Stores {
  TempDir dir;
  fs::path a = dir / "a" / "expctl.db";
  fs::path b = dir / "b" / "expctl.db";
  fs::path into = dir / "merged" / "expctl.db";
  store::RunRecord only_a, only_b, shared;

  Stores() {
    {
      // The shared run: recorded once, then brought into both stores (as two array tasks' stores
      // that were each merged from a common one).
      auto common = store::Store::open(dir / "common" / "expctl.db");
      shared = add_run(common, "shared", "sweep:s");
    }
    auto store_a = store::Store::open(a);
    auto store_b = store::Store::open(b);
    store::merge_store(store_a, dir / "common" / "expctl.db", {.copy_run_folders = true});
    store::merge_store(store_b, dir / "common" / "expctl.db", {.copy_run_folders = true});
    only_a = add_run(store_a, "only-a", "sweep:s");
    only_b = add_run(store_b, "only-b", "sweep:s");
  }
};

}  // namespace

TEST_CASE("merge: two stores with disjoint runs and one shared run give one store with all of them") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  const auto from_a = store::merge_store(into, stores.a);
  const auto from_b = store::merge_store(into, stores.b);
  CHECK(from_a.added.size() == 2);
  CHECK(from_a.present.empty());
  CHECK(from_b.added == std::vector<std::string>{stores.only_b.id});
  CHECK(from_b.present == std::vector<std::string>{stores.shared.id});
  CHECK(into.list_runs().size() == 3);
  const auto source_a = store::Store::open(stores.a, store::OpenMode::read_only);
  const auto source_b = store::Store::open(stores.b, store::OpenMode::read_only);
  CHECK(content_of(into, stores.only_a.id) == content_of(source_a, stores.only_a.id));
  CHECK(content_of(into, stores.only_b.id) == content_of(source_b, stores.only_b.id));
  CHECK(content_of(into, stores.shared.id) == content_of(source_a, stores.shared.id));
  CHECK(into.run(stores.only_a.id)->tags == std::vector<std::string>{"sweep:s"});
  CHECK(into.run(stores.only_a.id)->run_dir == store::runs_root(stores.into) / stores.only_a.id);
  CHECK(into.spec(stores.only_b.spec_hash).has_value());
  CHECK(into.environment("env-a").has_value());
  CHECK(store::check_integrity(into) == "ok");
}

TEST_CASE("merge: merging again changes nothing") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  store::merge_store(into, stores.a);
  store::merge_store(into, stores.b);
  std::map<std::string, std::string> before;
  for (const auto& run : into.list_runs()) {
    before[run.id] = content_of(into, run.id);
  }
  const auto again = store::merge_store(into, stores.a);
  CHECK(again.added.empty());
  CHECK(again.present.size() == 2);
  CHECK(again.tags_added == 0);
  CHECK(again.specs_added == 0);
  CHECK(again.environments_added == 0);
  std::map<std::string, std::string> after;
  for (const auto& run : into.list_runs()) {
    after[run.id] = content_of(into, run.id);
  }
  CHECK(after == before);
  CHECK(store::check_integrity(into) == "ok");
}

TEST_CASE("merge: a run id with different content is refused by name and nothing of that source is merged") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  store::merge_store(into, stores.a);
  store::testing::execute_sql(stores.b, fmt::format("UPDATE runs SET status = 'failed' WHERE id = '{}'", stores.shared.id));
  CHECK_THROWS_WITH(store::merge_store(into, stores.b),
                    Catch::StartsWith(stores.b.string() + ": run " + stores.shared.id +
                                      " is in both with different content (status: \"completed\" here, \"failed\" in " +
                                      stores.b.string() + "); nothing of " + stores.b.string() + " was merged into "));
  CHECK_FALSE(into.run(stores.only_b.id).has_value());
  CHECK(into.run(stores.shared.id)->status == RunStatus::completed);
  CHECK(store::check_integrity(into) == "ok");
}

TEST_CASE("merge: different metrics, ranks or artifacts of a shared run are conflicts too") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  store::merge_store(into, stores.a);
  const std::string id = stores.shared.id;
  SECTION("a metric value") {
    // The point is in the run's open chunk, or in a sealed one (its bytes then differ).
    store::testing::execute_sql(
        stores.b, fmt::format("UPDATE metric_points SET bits = 9 WHERE run_id = '{0}' AND step = 1; UPDATE "
                              "metric_chunks SET data = data || x'00' WHERE run_id = '{0}' AND first_step <= 1",
                              id));
    CHECK_THROWS_WITH(store::merge_store(into, stores.b), Catch::Contains("run " + id + " is in both with different content (its metrics differ)"));
  }
  SECTION("a missing rank") {
    store::testing::execute_sql(stores.b, fmt::format("DELETE FROM ranks WHERE run_id = '{}' AND rank = 1", id));
    CHECK_THROWS_WITH(store::merge_store(into, stores.b), Catch::Contains("(its ranks differ)"));
  }
  SECTION("an artifact's hash") {
    store::testing::execute_sql(stores.b, fmt::format("UPDATE artifacts SET sha256 = '{}' WHERE run_id = '{}'",
                                                      std::string(64, 'b'), id));
    CHECK_THROWS_WITH(store::merge_store(into, stores.b), Catch::Contains("(its artifacts differ)"));
  }
  CHECK(into.list_runs().size() == 2);
}

TEST_CASE("merge: tags of a present run are added, not compared") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  store::merge_store(into, stores.a);
  {
    auto b = store::Store::open(stores.b);
    b.add_tag(stores.shared.id, "baseline:nightly");
  }
  const auto result = store::merge_store(into, stores.b);
  CHECK(result.tags_added == 2);  // the new run's tag and the shared run's new one
  CHECK(into.run(stores.shared.id)->tags == std::vector<std::string>{"baseline:nightly", "sweep:s"});
}

TEST_CASE("merge: the sources are never written, not even a -wal or -shm beside them") {
  Stores stores;
  const auto before = files_of(stores.dir / "a");
  auto into = store::Store::open(stores.into);
  store::merge_store(into, stores.a, {.copy_run_folders = true});
  CHECK(files_of(stores.dir / "a") == before);
  CHECK_FALSE(fs::exists(stores.a.string() + "-wal"));
}

TEST_CASE("merge: a source at an older schema is migrated in a copy, never in place") {
  TempDir dir;
  const fs::path old_path = dir / "old" / "expctl.db";
  const std::string id = "20250101-000000-abcdef";
  {
    auto old = store::testing::open_at_schema_version(old_path, 2);
    old.put_spec(test::fake_spec_hash("old"), "{}", "old");
  }
  // As expctl with schema v2 wrote it (create_run now records columns v2 does not have).
  store::testing::execute_sql(old_path, "INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir, summary) "
                                        "VALUES ('" + id + "', '" + test::fake_spec_hash("old") +
                                        "', 'old', 'completed', '2025-01-01T00:00:00.000Z', 'runs/" + id + "', '{}')");
  const auto before = files_of(dir / "old");
  auto into = store::Store::open(dir / "merged" / "expctl.db");
  const auto result = store::merge_store(into, old_path);
  CHECK(result.added == std::vector<std::string>{id});
  CHECK(files_of(dir / "old") == before);
  CHECK(into.run(id)->status == RunStatus::completed);
  CHECK(store::check_integrity(into) == "ok");
}

TEST_CASE("merge: run folders are copied with --runs-dir, and a folder already there is kept") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  const auto result = store::merge_store(into, stores.a, {.copy_run_folders = true});
  CHECK(result.folders_copied.size() == 2);
  const fs::path log = store::runs_root(stores.into) / stores.only_a.id / "logs" / "rank-0.log";
  CHECK(fs::exists(log));
  CHECK(fs::exists(store::runs_root(stores.into) / stores.only_a.id / "spec.json"));
  const auto again = store::merge_store(into, stores.a, {.copy_run_folders = true});
  CHECK(again.folders_copied.empty());
  fs::remove_all(stores.dir / "b" / "runs" / stores.only_b.id);
  const auto missing = store::merge_store(into, stores.b, {.copy_run_folders = true});
  CHECK(missing.folders_missing == std::vector<std::string>{stores.only_b.id});
}

TEST_CASE("merge: bad sources are refused with the path and what to do") {
  Stores stores;
  auto into = store::Store::open(stores.into);
  CHECK_THROWS_WITH(store::merge_store(into, stores.dir / "nope.db"),
                    (stores.dir / "nope.db").string() + ": no such database: check the path");
  CHECK_THROWS_WITH(store::merge_store(into, stores.into),
                    stores.into.string() + ": is the destination itself: name another store with --into");
  const auto text = stores.dir.write("text.db", "this is not sqlite, just some text that is long enough to be a header");
  CHECK_THROWS_WITH(store::merge_store(into, text), Catch::StartsWith(text.string() + ": not an expctl database"));
  CHECK(into.list_runs().empty());
}
