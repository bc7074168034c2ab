// One run-id grammar checked wherever an id is read (issue 49, items 5 and 6), and run folders
// that know their store, so that gc never takes another store's runs for orphans.
#include <fstream>

#include "backend_fixture.hpp"

#include "expctl/store/run_folder.hpp"

using namespace expctl;
using store::RunStatus;
using test::BackendStore;
namespace fs = std::filesystem;

namespace {

const std::string& k_spec = test::k_contract_spec;
const std::string& k_hash = test::k_contract_hash;

/// A row as a hostile program on a node (which holds the writer's password) could plant it.
void plant_row(const BackendStore& where, const std::string& id) {
  where.execute("INSERT INTO runs (id, spec_hash, name, status, started_at, run_dir) VALUES ('" + id + "', '" + k_hash +
                "', 'planted', 'completed', '2026-01-01T00:00:00.000Z', 'x')");
}

/// Makes `folder` look idle for a day (gc leaves young folders alone).
void age(const fs::path& folder) {
  fs::last_write_time(folder, fs::file_time_type::clock::now() - std::chrono::hours(24));
}

}  // namespace

TEST_CASE("run ids: one grammar, YYYYMMDD-HHMMSS-xxxxxx, and its prefixes", "[store][ids]") {
  CHECK(store::is_run_id("20261206-071502-3fa9c2"));
  CHECK_FALSE(store::is_run_id("20261206-071502-3FA9C2"));  // lowercase hex only
  CHECK_FALSE(store::is_run_id("20261206-071502-3fa9c"));
  CHECK_FALSE(store::is_run_id("20261206-071502-3fa9c2x"));
  CHECK_FALSE(store::is_run_id("../../victim"));
  CHECK_FALSE(store::is_run_id("20261206-071502/../x"));
  CHECK_FALSE(store::is_run_id(std::string("20261206-071502-3fa9c\0", 22)));
  CHECK(store::is_run_id_prefix("2026"));
  CHECK(store::is_run_id_prefix("20261206-07"));
  CHECK_FALSE(store::is_run_id_prefix(""));
  CHECK_FALSE(store::is_run_id_prefix("../"));
  CHECK_FALSE(store::is_run_id_prefix("2026/"));
  CHECK_THAT(store::invalid_run_id_text("../x\x1b[31m", "db"),
             Catch::Contains("db: \"../x\\x1b[31m\" is not a run id") && !Catch::Contains("\x1b"));
}

TEMPLATE_TEST_CASE("run ids: a planted row whose id is a path is never used as one", "[store][ids]", test::OnSqlite,
                   test::OnPostgres) {
  BackendStore where(TestType::kind);
  if (!where.available)
    return;
  auto db = where.open();
  db.put_spec(k_hash, k_spec, "quickstart");
  const auto real = db.create_run({k_hash, std::nullopt, "real", std::nullopt});
  db.finish_run(real.id, RunStatus::completed, 0, "");
  // The target: a folder beside the runs folder that gc, rm or a merge would reach through "..".
  const fs::path victim = where.dir / "victim";
  fs::create_directories(victim / "data");
  std::ofstream(victim / "data" / "keep.txt") << "precious";
  plant_row(where, "../victim");

  SECTION("reading leaves it out, with a warning") {
    const auto runs = db.list_runs();
    REQUIRE(runs.size() == 1);
    CHECK(runs.front().id == real.id);
    CHECK_FALSE(db.run("../victim").has_value());
  }
  SECTION("a selector that is not a run id or a prefix of one matches nothing, and is named") {
    CHECK_THROWS_WITH(db.find_run("../victim"), Catch::Contains("no run matches \"../victim\""));
  }
  SECTION("run_folder, remove_run and gc never make a path of it") {
    CHECK_THROWS_WITH(db.run_folder("../victim"), Catch::Contains("is not a run id"));
    CHECK_THROWS_WITH(db.remove_run("../victim"), Catch::Contains("is not a run id"));
    for (const auto& orphan : db.orphaned_folders(std::chrono::seconds(0))) {
      CHECK(orphan.parent_path() == db.runs_dir());
    }
  }
  CHECK(fs::exists(victim / "data" / "keep.txt"));
}

TEST_CASE("run ids: merge refuses a source holding an id that is a path, and merges nothing of it", "[store][ids]") {
  BackendStore source(store::StoreKind::sqlite);
  BackendStore into(store::StoreKind::sqlite);
  {
    auto db = source.open();
    db.put_spec(k_hash, k_spec, "quickstart");
    const auto run = db.create_run({k_hash, std::nullopt, "real", std::nullopt});
    db.finish_run(run.id, RunStatus::completed, 0, "");
  }
  plant_row(source, "../../outside");
  auto destination = into.open();
  CHECK_THROWS_WITH(store::merge_store(destination, source.location, {.copy_run_folders = true}),
                    Catch::Contains("\"../../outside\" is not a run id") && Catch::Contains("nothing of"));
  CHECK(destination.list_runs().empty());
}

TEST_CASE("run folders: each names the store that created it, and gc collects only its own store's folders",
          "[store][gc]") {
  // Two SQLite stores in one results folder share runs/ (a Slurm array's task stores).
  const test::TempDir dir;
  auto a = store::Store::open((dir / "results" / "task-1.db").string());
  auto b = store::Store::open((dir / "results" / "task-2.db").string());
  REQUIRE(a.runs_dir() == b.runs_dir());
  a.put_spec(k_hash, k_spec, "quickstart");
  b.put_spec(k_hash, k_spec, "quickstart");
  const auto run_a = a.create_run({k_hash, std::nullopt, "a", std::nullopt});
  const auto run_b = b.create_run({k_hash, std::nullopt, "b", std::nullopt});
  CHECK(store::detail::folder_owner(run_a.run_dir) == "task-1.db");
  CHECK(store::detail::folder_owner(run_b.run_dir) == "task-2.db");
  age(run_a.run_dir);
  age(run_b.run_dir);
  // Neither takes the other's run for an orphan (before, each listed the other's folder).
  CHECK(a.orphaned_folders(std::chrono::seconds(0)).empty());
  CHECK(b.orphaned_folders(std::chrono::seconds(0)).empty());

  SECTION("a folder of its own that it no longer knows is an orphan") {
    a.backend().delete_run(run_a.id);  // the row gone, the folder left (a crash between the two)
    CHECK(a.orphaned_folders(std::chrono::seconds(0)) == std::vector<fs::path>{run_a.run_dir});
    CHECK(b.orphaned_folders(std::chrono::seconds(0)).empty());
  }
  SECTION("a folder from before folders named their store is an orphan only when no store beside runs/ knows it") {
    fs::remove(run_b.run_dir / store::detail::k_store_marker);
    CHECK(a.orphaned_folders(std::chrono::seconds(0)).empty());  // task-2.db knows it
    const fs::path stray = a.runs_dir() / "20250101-000000-00abcd";
    fs::create_directories(stray);
    age(stray);
    CHECK(a.orphaned_folders(std::chrono::seconds(0)) == std::vector<fs::path>{stray});
  }
  SECTION("folders whose names are not run ids are never orphans") {
    fs::create_directories(a.runs_dir() / "notes");
    age(a.runs_dir() / "notes");
    CHECK(a.orphaned_folders(std::chrono::seconds(0)).empty());
  }
}

TEST_CASE("run folders: with a server as the store, the node's own store's runs are never orphans", "[store][gc]") {
  BackendStore server(store::StoreKind::postgresql);
  if (!server.available)
    return;
  // The node's store records runs in results/runs; a server opened with the same runs folder
  // (expctl's default) knows none of those not shipped yet.
  const test::TempDir dir;
  auto node = store::Store::open((dir / "results" / "expctl.db").string());
  node.put_spec(k_hash, k_spec, "quickstart");
  const auto running = node.create_run({k_hash, std::nullopt, "unshipped", std::nullopt});
  age(running.run_dir);
  auto team = store::Store::open(server.location, store::OpenMode::read_write, {.runs_root = node.runs_dir()});
  CHECK(team.orphaned_folders(std::chrono::seconds(0)).empty());
  CHECK(node.orphaned_folders(std::chrono::seconds(0)).empty());
}
