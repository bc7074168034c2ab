#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/store/run_folder.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/atomic_file.hpp"

using namespace expctl;
using store::RunStatus;
using test::StoreFixture;
namespace fs = std::filesystem;

TEST_CASE("store: a new database gets the latest schema, WAL and a runs folder beside it") {
  StoreFixture f;
  CHECK(fs::exists(f.db_path));
  CHECK(f.db.schema_version() == store::latest_schema_version());
  CHECK(store::latest_schema_version() == 9);
  CHECK(fs::exists(fs::path(f.db_path.string() + "-wal")));
  CHECK(f.db.path() == fs::absolute(f.db_path));
  CHECK(store::runs_root(f.db_path) == fs::absolute(f.dir / "results" / "runs"));
}

TEST_CASE("store: specs and environments round-trip, and a known hash keeps its first record") {
  StoreFixture f;
  const auto spec = f.db.spec(f.spec_hash);
  REQUIRE(spec.has_value());
  CHECK(spec->hash == f.spec_hash);
  CHECK(spec->name == "quickstart");
  CHECK(spec->canonical == test::k_canonical_spec);
  f.db.put_spec(f.spec_hash, "{}", "other");
  CHECK(f.db.spec(f.spec_hash)->canonical == test::k_canonical_spec);
  CHECK_FALSE(f.db.spec(test::fake_spec_hash("nope")).has_value());

  f.db.put_environment("env1", R"({"host":"node1","torch":"1.13.1"})");
  CHECK(f.db.environment("env1") == std::optional<std::string>(R"({"host":"node1","torch":"1.13.1"})"));
  CHECK_FALSE(f.db.environment("env2").has_value());
}

TEST_CASE("store: bad hashes and non-object JSON are refused with clear messages") {
  StoreFixture f;
  CHECK_THROWS_WITH(f.db.put_spec("ABC", "{}", "x"),
                    "spec hash \"ABC\" is not 64 lowercase hex digits (as printed by 'expctl hash')");
  CHECK_THROWS_WITH(f.db.put_environment("e", "[1,2]"),
                    "an environment fingerprint must be a JSON object, got: \"[1,2]\"");
  const auto run = f.new_run();
  CHECK_THROWS_WITH(f.db.set_summary(run.id, "not json"), "a run summary must be a JSON object, got: \"not json\"");
  CHECK_THROWS_AS(f.db.create_run({test::fake_spec_hash("unknown"), std::nullopt, "x", std::nullopt}),
                  util::StoreError);
  CHECK_THROWS_WITH(f.db.create_run({f.spec_hash, std::string("missing-env"), "x", std::nullopt}),
                    Catch::Contains("environment missing-env is not in"));
}

TEST_CASE("store: create_run records a running run and publishes its folder with the spec inside") {
  StoreFixture f;
  f.db.put_environment("env1", "{}");
  const auto run = f.db.create_run({f.spec_hash, std::string("env1"), "my run", std::nullopt});
  CHECK(run.status == RunStatus::running);
  CHECK(run.name == "my run");
  CHECK(run.environment_hash == std::optional<std::string>("env1"));
  CHECK(run.run_dir == store::runs_root(f.db_path) / run.id);
  CHECK(util::read_file(run.run_dir / "spec.json").value() == test::k_canonical_spec);
  CHECK(fs::is_directory(run.run_dir / "logs"));
  CHECK(fs::is_directory(run.run_dir / "checkpoints"));
  // Nothing but the published folder is left in runs/ (no staging leftovers).
  std::vector<fs::path> entries(fs::directory_iterator(store::runs_root(f.db_path)), fs::directory_iterator());
  CHECK(entries == std::vector<fs::path>{run.run_dir});

  const auto stored = f.db.run(run.id);
  REQUIRE(stored.has_value());
  CHECK(stored->id == run.id);
  CHECK(stored->spec_hash == f.spec_hash);
  CHECK(stored->started_at == run.started_at);
  CHECK_FALSE(stored->ended_at.has_value());
  CHECK_FALSE(stored->exit_code.has_value());
  CHECK(stored->summary_json == "{}");
  CHECK(stored->run_dir == run.run_dir);
}

TEST_CASE("store: an empty run name takes the spec's name") {
  StoreFixture f;
  CHECK(f.new_run("").name == "quickstart");
}

TEST_CASE("store: run ids have the documented shape, are unique and sort in creation order") {
  StoreFixture f;
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    ids.push_back(f.new_run().id);
  }
  for (const std::string& id : ids) {
    CHECK(id.size() == 22);
    CHECK(id[8] == '-');
    CHECK(id[15] == '-');
  }
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size());
}

TEST_CASE("store: two stores holding the same greatest id of a second rarely pick the same next id") {
  // Array tasks' stores merged from a common one, each starting a run in that run's second: the
  // same next id in both would make merging them refused. Expected about 0.03-0.06 equal pairs of
  // 2000 here (it was about 8 with steps of at most 256).
  const auto now = store::Clock::now();
  const std::string greatest = store::detail::run_id_second(now) + "-3f0000";
  int equal = 0;
  for (int pair = 0; pair < 2000; ++pair) {
    const auto first = store::detail::make_run_id(now, greatest);
    const auto second = store::detail::make_run_id(now, greatest);
    CHECK(first > greatest);
    equal += first == second ? 1 : 0;
  }
  CHECK(equal <= 2);
}

TEST_CASE("store: one second holds thousands of run ids, then says to wait a second") {
  const auto now = store::Clock::now();
  std::optional<std::string> greatest;
  int made = 0;
  try {
    for (; made < 100000; ++made) {
      const auto id = store::detail::make_run_id(now, greatest);
      REQUIRE((!greatest || id > *greatest));
      greatest = id;
    }
  } catch (const util::StoreError& error) {
    CHECK_THAT(error.what(), Catch::Contains("too many runs started in the second") &&
                                 Catch::Contains("wait a second and retry"));
  }
  CHECK(made >= 2000);
  CHECK(made < 100000);
}

TEST_CASE("store: a run started at a given time carries that time in its id and record") {
  StoreFixture f;
  const auto time = store::parse_utc("2025-03-04T05:06:07.089Z").value();
  const auto run = f.db.create_run({f.spec_hash, std::nullopt, "old", time});
  CHECK(run.id.substr(0, 16) == "20250304-050607-");
  CHECK(f.db.run(run.id)->started_at == "2025-03-04T05:06:07.089Z");
}

TEST_CASE("store: finish_run and set_summary are stored, and finishing as running or lost is refused") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.finish_run(run.id, RunStatus::failed, 1, "rank 1 killed by SIGKILL");
  f.db.set_summary(run.id, R"({"final_train_loss":0.25})");
  const auto stored = f.db.run(run.id).value();
  CHECK(stored.status == RunStatus::failed);
  CHECK(stored.exit_code == std::optional<int>(1));
  CHECK(stored.root_cause == "rank 1 killed by SIGKILL");
  CHECK(stored.ended_at.has_value());
  CHECK(stored.summary_json == R"({"final_train_loss":0.25})");
  CHECK(stored.duration_seconds().value() >= 0.0);
  CHECK_THROWS_WITH(f.db.finish_run(run.id, RunStatus::running, 0, ""),
                    "finish_run of " + run.id + " needs an end status, not running");
  CHECK_THROWS_WITH(f.db.finish_run(run.id, RunStatus::lost, 0, ""),
                    "finish_run of " + run.id + " needs an end status, not lost");
  CHECK(f.db.run(run.id)->status == RunStatus::failed);
  CHECK_THROWS_WITH(f.db.finish_run("nosuchrun", RunStatus::completed, 0, ""),
                    Catch::StartsWith("no run \"nosuchrun\" in "));
}

TEST_CASE("store: ranks round-trip and update") {
  StoreFixture f;
  f.db.put_environment("env-rank1", "{}");
  const auto run = f.new_run();
  f.db.add_rank(run.id, store::RankRecord{1, "node2", 4242, std::string("env-rank1"), RunStatus::running, {}, {}});
  f.db.add_rank(run.id, store::RankRecord{0, "node1", 4241, std::nullopt, RunStatus::running, {}, {}});
  f.db.update_rank(run.id, 1, RunStatus::failed, std::nullopt, 9);
  f.db.update_rank(run.id, 0, RunStatus::completed, 0, std::nullopt);
  const auto ranks = f.db.ranks(run.id);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[0].host == "node1");
  CHECK(ranks[0].pid == std::optional<std::int64_t>(4241));
  CHECK(ranks[0].status == RunStatus::completed);
  CHECK(ranks[0].exit_code == std::optional<int>(0));
  CHECK_FALSE(ranks[0].signal.has_value());
  CHECK(ranks[1].environment_hash == std::optional<std::string>("env-rank1"));
  CHECK(ranks[1].status == RunStatus::failed);
  CHECK(ranks[1].signal == std::optional<int>(9));
  CHECK_FALSE(ranks[1].exit_code.has_value());
  CHECK_THROWS_WITH(f.db.update_rank(run.id, 7, RunStatus::failed, 1, std::nullopt), Catch::Contains("has no rank 7"));
  CHECK_THROWS_AS(f.db.add_rank(run.id, store::RankRecord{0, "dup", {}, {}, RunStatus::running, {}, {}}),
                  util::StoreError);
}

TEST_CASE("store: a rank whose exit was never written reads as lost once its run is not running") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.add_rank(run.id, store::RankRecord{0, "node1", 4241, std::nullopt, RunStatus::running, {}, {}});
  f.db.add_rank(run.id, store::RankRecord{1, "node1", 4242, std::nullopt, RunStatus::running, {}, {}});
  CHECK(f.db.ranks(run.id)[1].status == RunStatus::running);  // the run is still going
  f.db.update_rank(run.id, 0, RunStatus::failed, 1, std::nullopt);
  f.db.finish_run(run.id, RunStatus::failed, 1, "rank 0 exited with code 1");  // rank 1's exit was lost
  const auto ranks = f.db.ranks(run.id);
  CHECK(ranks[0].status == RunStatus::failed);
  CHECK(ranks[1].status == RunStatus::lost);
  CHECK_FALSE(ranks[1].exit_code.has_value());
}

TEST_CASE("store: metrics round-trip in order, keep NaN, and a re-logged step replaces its value") {
  StoreFixture f;
  const auto run = f.new_run();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<store::MetricPoint> points{
      {0, 2, "loss", 0.5}, {0, 1, "loss", 0.9}, {1, 1, "loss", 0.8}, {0, 1, "lr", 0.1}, {0, 3, "loss", nan}};
  f.db.append_metrics(run.id, points);
  f.db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 2, "loss", 0.4}});

  const auto all = f.db.metrics(run.id);
  REQUIRE(all.size() == 5);
  CHECK(all[0].name == "loss");
  CHECK(all[0].rank == 0);
  CHECK(all[0].step == 1);
  CHECK(all[1].step == 2);
  CHECK(all[1].value == 0.4);
  CHECK(std::isnan(all[2].value));
  CHECK(all[3].rank == 1);
  CHECK(all[4].name == "lr");

  const auto rank1 = f.db.metrics(run.id, store::MetricFilter{std::string("loss"), 1});
  REQUIRE(rank1.size() == 1);
  CHECK(rank1[0].value == 0.8);
  CHECK(f.db.metrics(run.id, store::MetricFilter{std::string("lr"), std::nullopt}).size() == 1);

  const auto series = f.db.metric_series(run.id);
  REQUIRE(series.size() == 2);
  CHECK(series[0].name == "loss");
  CHECK(series[0].points == 4);
  CHECK(series[0].ranks == 2);
  CHECK(series[0].first_rank == 0);
  CHECK(series[0].first_step == 1);
  CHECK(series[0].first_value == 0.9);
  CHECK(series[0].last_step == 3);
  CHECK(std::isnan(series[0].last_value));
  CHECK(series[1].name == "lr");
  CHECK(series[1].points == 1);

  CHECK_THROWS_WITH(f.db.append_metrics("nosuchrun", points), Catch::StartsWith("no run \"nosuchrun\""));
}

TEST_CASE("store: a failing metric batch leaves none of its points behind") {
  StoreFixture f;
  const auto run = f.new_run();
  std::vector<store::MetricPoint> points{{0, 1, "loss", 1.0}, {0, 2, "", 2.0}};
  CHECK_THROWS_AS(f.db.append_metrics(run.id, points), util::StoreError);
  CHECK(f.db.metrics(run.id).empty());
}

TEST_CASE("store: artifacts round-trip, and the same path again replaces it") {
  StoreFixture f;
  const auto run = f.new_run();
  const std::string hash_a(64, 'a');
  const std::string hash_b(64, 'b');
  f.db.add_artifact(run.id, {"checkpoints/step-10.pt", hash_a, 100});
  f.db.add_artifact(run.id, {"checkpoints/step-10.pt", hash_b, 120});
  f.db.add_artifact(run.id, {"a.log", hash_a, 0});
  const auto artifacts = f.db.artifacts(run.id);
  REQUIRE(artifacts.size() == 2);
  CHECK(artifacts[0].path == "a.log");
  CHECK(artifacts[1].path == "checkpoints/step-10.pt");
  CHECK(artifacts[1].sha256 == hash_b);
  CHECK(artifacts[1].size_bytes == 120);
  CHECK_THROWS_AS(f.db.add_artifact(run.id, {"x", "short", 1}), util::StoreError);
  CHECK(f.db.remove_artifact(run.id, "checkpoints/step-10.pt"));
  CHECK_FALSE(f.db.remove_artifact(run.id, "checkpoints/step-10.pt"));
  REQUIRE(f.db.artifacts(run.id).size() == 1);
  CHECK(f.db.artifacts(run.id)[0].path == "a.log");
}

TEST_CASE("store: tags are unique per run, sorted, removable and validated") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.add_tag(run.id, "nightly:2026-11-29");
  f.db.add_tag(run.id, "baseline");
  f.db.add_tag(run.id, "baseline");
  CHECK(f.db.run(run.id)->tags == std::vector<std::string>{"baseline", "nightly:2026-11-29"});
  CHECK(f.db.remove_tag(run.id, "baseline"));
  CHECK_FALSE(f.db.remove_tag(run.id, "baseline"));
  CHECK(f.db.run(run.id)->tags == std::vector<std::string>{"nightly:2026-11-29"});
  CHECK_THROWS_WITH(f.db.add_tag(run.id, "a b"),
                    "tag \"a b\" is not valid: tags are non-empty and have no spaces, commas or control characters");
  CHECK_THROWS_AS(f.db.add_tag(run.id, "a,b"), util::StoreError);
  CHECK_THROWS_AS(f.db.add_tag(run.id, ""), util::StoreError);
}

TEST_CASE("store: list_runs is newest first and filters by status, tag, spec prefix and limit") {
  StoreFixture f;
  const std::string other_hash = test::fake_spec_hash("other");
  f.db.put_spec(other_hash, "{}", "other");
  const auto t0 = store::parse_utc("2026-01-01T00:00:00.000Z").value();
  const auto a = f.db.create_run({f.spec_hash, std::nullopt, "a", t0});
  const auto b = f.db.create_run({other_hash, std::nullopt, "b", t0 + std::chrono::hours(1)});
  const auto c = f.db.create_run({f.spec_hash, std::nullopt, "c", t0 + std::chrono::hours(2)});
  f.db.finish_run(b.id, RunStatus::completed, 0, "");
  f.db.add_tag(a.id, "keep");

  auto ids = [](const std::vector<store::RunRecord>& runs) {
    std::vector<std::string> out;
    for (const auto& run : runs) {
      out.push_back(run.id);
    }
    return out;
  };
  CHECK(ids(f.db.list_runs()) == std::vector<std::string>{c.id, b.id, a.id});
  CHECK(ids(f.db.list_runs({RunStatus::completed, {}, "", 0})) == std::vector<std::string>{b.id});
  CHECK(ids(f.db.list_runs({RunStatus::running, {}, "", 0})) == std::vector<std::string>{c.id, a.id});
  CHECK(ids(f.db.list_runs({{}, std::string("keep"), "", 0})) == std::vector<std::string>{a.id});
  CHECK(ids(f.db.list_runs({{}, {}, other_hash.substr(0, 8), 0})) == std::vector<std::string>{b.id});
  CHECK(ids(f.db.list_runs({{}, {}, "", 2})) == std::vector<std::string>{c.id, b.id});
  CHECK(f.db.list_runs({{}, std::string("none"), "", 0}).empty());
  CHECK_THROWS_WITH(f.db.list_runs({{}, {}, "XYZ", 0}), "spec hash prefix \"XYZ\" is not lowercase hex");
}

TEST_CASE("store: find_run takes a full id or a unique prefix, and names the selector otherwise") {
  StoreFixture f;
  const auto t0 = store::parse_utc("2026-02-03T04:05:06.000Z").value();
  const auto first = f.db.create_run({f.spec_hash, std::nullopt, "a", t0});
  const auto second = f.db.create_run({f.spec_hash, std::nullopt, "b", t0});
  const auto later = f.db.create_run({f.spec_hash, std::nullopt, "c", t0 + std::chrono::hours(30)});
  CHECK(f.db.find_run(first.id).id == first.id);
  CHECK(f.db.find_run(later.id.substr(0, 8)).id == later.id);
  CHECK_THROWS_WITH(f.db.find_run("20260203"), "run selector \"20260203\" is ambiguous: it matches 2 runs (" +
                                                   first.id + ", " + second.id + "); give more of the id");
  CHECK_THROWS_WITH(f.db.find_run("nosuchrun"),
                    "no run matches \"nosuchrun\" in " + f.db_path.string() + " (see 'expctl list' for run ids)");
  try {
    f.db.find_run("nosuchrun");
    FAIL("find_run found a run that does not exist");
  } catch (const util::StoreError& error) {
    CHECK(error.exit_code() == util::ExitCode::usage);
  }
  CHECK_THROWS_AS(f.db.find_run(""), util::StoreError);
}

TEST_CASE("store: the schema refuses an unknown status and rows of unknown runs") {
  StoreFixture f;
  const auto run = f.new_run();
  CHECK_THROWS_WITH(
      store::testing::execute_sql(f.db_path, "UPDATE runs SET status = 'exploded' WHERE id = '" + run.id + "'"),
      Catch::Contains("CHECK constraint failed"));
  CHECK_THROWS_WITH(store::testing::execute_sql(f.db_path, "INSERT INTO tags (run_id, tag) VALUES ('nosuchrun', 'x')"),
                    Catch::Contains("FOREIGN KEY constraint failed"));
  CHECK(f.db.run(run.id)->status == RunStatus::running);
}

TEST_CASE("store: status names round-trip in enum order and unknown ones are refused") {
  for (const auto name : store::k_run_status_names) {
    const auto status = store::parse_run_status(name);
    REQUIRE(status.has_value());
    CHECK(store::to_string(*status) == name);
  }
  CHECK(std::vector<std::string_view>(std::begin(store::k_run_status_names), std::end(store::k_run_status_names)) ==
        std::vector<std::string_view>{"running", "completed", "failed", "interrupted", "diverged", "lost", "queued"});
  CHECK(store::to_string(RunStatus::diverged) == "diverged");
  CHECK(store::to_string(RunStatus::lost) == "lost");
  CHECK_FALSE(store::parse_run_status("runing").has_value());
}

TEST_CASE("store: the schema admits every status name for runs, and every one but queued for ranks") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.add_rank(run.id, store::RankRecord{0, "node1", 1, std::nullopt, RunStatus::running, {}, {}});
  for (const auto name : store::k_run_status_names) {
    const std::string value(name);
    store::testing::execute_sql(f.db_path, "UPDATE runs SET status = '" + value + "' WHERE id = '" + run.id + "'");
    const std::string rank_update = "UPDATE ranks SET status = '" + value + "' WHERE run_id = '" + run.id + "'";
    if (name == "queued") {  // a run waits for its job; its ranks do not exist until the job starts them
      CHECK_THROWS_WITH(store::testing::execute_sql(f.db_path, rank_update),
                        Catch::Contains("CHECK constraint failed"));
      continue;
    }
    store::testing::execute_sql(f.db_path, rank_update);
    CHECK(f.db.ranks(run.id).at(0).status == store::parse_run_status(name));
  }
  f.db.finish_run(run.id, RunStatus::diverged, 1, "train_loss is NaN at step 7");
  f.db.update_rank(run.id, 0, RunStatus::diverged, 1, std::nullopt);
  CHECK(f.db.run(run.id)->status == RunStatus::diverged);
  CHECK(f.db.ranks(run.id).at(0).status == RunStatus::diverged);
  CHECK(f.db.list_runs({RunStatus::diverged, {}, "", 0}).size() == 1);
}

TEST_CASE("store: UTC timestamps format and parse to the millisecond") {
  const auto time = store::Clock::time_point(std::chrono::milliseconds(1'764'455'478'042));
  CHECK(store::format_utc(time) == "2025-11-29T22:31:18.042Z");
  CHECK(store::parse_utc("2025-11-29T22:31:18.042Z") == time);
  CHECK(store::parse_utc("2025-11-29T22:31:18Z") == time - std::chrono::milliseconds(42));
  CHECK_FALSE(store::parse_utc("2025-11-29 22:31:18").has_value());
  CHECK_FALSE(store::parse_utc("yesterday").has_value());
  // A damaged record is no time: fields timegm would normalise into another date, and a year whose
  // nanoseconds overflow the clock (the fuzzer's store_read finding: 2426 overflowed in chrono).
  CHECK_FALSE(store::parse_utc("2025-13-01T00:00:00Z").has_value());
  CHECK_FALSE(store::parse_utc("2025-11-29T22:31:99Z").has_value());
  CHECK_FALSE(store::parse_utc("2426-11-29T22:31:18Z").has_value());
  CHECK_FALSE(store::parse_utc("9999-12-31T23:59:59.999Z").has_value());
  CHECK(store::parse_utc("2200-12-31T23:59:59.999Z").has_value());
}

TEST_CASE("store: a full database is reported in one line, the failed batch leaves nothing, finish_run still works") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 0, "loss", 1.0}});
  store::testing::limit_database_pages(f.db, 1);  // below the current size: every page-adding write fails
  std::vector<store::MetricPoint> many;
  for (int step = 1; step <= 5000; ++step) {
    many.push_back({0, step, "loss", 1.0 / step});
  }
  try {
    f.db.append_metrics(run.id, many);
    FAIL("append_metrics did not fail on a full database");
  } catch (const util::StoreError& error) {
    CHECK(std::string(error.what()) ==
          f.db_path.string() + ": no space left on device (free some disk space and retry); the store is unchanged");
    CHECK(error.exit_code() == util::ExitCode::run_failed);
  }
  CHECK(f.db.metrics(run.id).size() == 1);
  // An update in place needs no new page: the runner can still record why the run failed.
  f.db.finish_run(run.id, RunStatus::failed, 1, "no space left on device");
  CHECK(f.db.run(run.id)->status == RunStatus::failed);
  CHECK(store::Store::open(f.db_path, store::OpenMode::read_only).run(run.id)->root_cause == "no space left on device");
}

TEST_CASE("store: an interrupted, failed or diverged run can be resumed, a completed one cannot") {
  StoreFixture f;
  const auto run = f.new_run();
  f.db.finish_run(run.id, RunStatus::interrupted, 130, "SIGINT at step 40");
  f.db.resume_run(run.id);
  const auto resumed = f.db.run(run.id).value();
  CHECK(resumed.status == RunStatus::running);
  CHECK_FALSE(resumed.ended_at.has_value());
  CHECK_FALSE(resumed.exit_code.has_value());
  CHECK(resumed.root_cause.empty());
  CHECK(resumed.started_at == run.started_at);
  CHECK_THROWS_WITH(f.db.resume_run(run.id),
                    "run " + run.id + " is running: only an interrupted, failed, diverged or lost run can be resumed");
  for (const auto status : {RunStatus::failed, RunStatus::diverged}) {
    f.db.finish_run(run.id, status, 1, "loss is NaN at step 12");
    CHECK(f.db.run(run.id)->status == status);
    f.db.resume_run(run.id);
    CHECK(f.db.run(run.id)->status == RunStatus::running);
    CHECK(f.db.run(run.id)->root_cause.empty());
  }
  f.db.finish_run(run.id, RunStatus::completed, 0, "");
  CHECK_THROWS_WITH(
      f.db.resume_run(run.id),
      "run " + run.id + " is completed: only an interrupted, failed, diverged or lost run can be resumed");
  CHECK_THROWS_WITH(f.db.resume_run("nosuchrun"), Catch::StartsWith("no run \"nosuchrun\""));
}
