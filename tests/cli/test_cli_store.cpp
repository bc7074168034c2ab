// `expctl list` and `expctl show` against stores built through the store API.
#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/sha256.hpp"

using namespace expctl;
using test::run_expctl;
namespace fs = std::filesystem;

namespace {

/// A store with three runs: an older completed one with everything filled in, a failed one, and
/// a running one.
struct CliStore {
  test::TempDir dir;
  fs::path db_path = dir / "results" / "expctl.db";
  std::string spec_hash = util::sha256_hex("cli spec");
  std::string other_hash = util::sha256_hex("other spec");
  store::RunRecord done;
  store::RunRecord failed;
  store::RunRecord running;

  CliStore() {
    auto db = store::Store::open(db_path);
    db.put_spec(spec_hash, R"({"name":"quickstart"})", "quickstart");
    db.put_spec(other_hash, R"({"name":"cnn"})", "cnn");
    db.put_environment("env-1", R"({"host":{"name":"node1"},"torch":"1.13.1"})");
    const auto t0 = store::parse_utc("2026-11-01T10:00:00.000Z").value();
    done = db.create_run({spec_hash, std::string("env-1"), "quickstart", t0});
    db.add_rank(done.id, {0, "node1", 100, std::nullopt, store::RunStatus::completed, 0, std::nullopt});
    db.add_rank(done.id, {1, "node1", 101, std::nullopt, store::RunStatus::completed, 0, std::nullopt});
    db.append_metrics(done.id, std::vector<store::MetricPoint>{
                                   {0, 1, "loss", 2.5}, {0, 2, "loss", 0.75}, {1, 1, "samples_per_sec", 900.0}});
    db.add_artifact(done.id, {"checkpoints/step-2.pt", std::string(64, 'c'), 2048});
    db.add_tag(done.id, "baseline");
    db.set_summary(done.id, R"({"final_train_loss":0.75,"eval_accuracy":0.9})");
    db.finish_run(done.id, store::RunStatus::completed, 0, "");
    failed = db.create_run({other_hash, std::nullopt, "cnn", t0 + std::chrono::hours(1)});
    db.finish_run(failed.id, store::RunStatus::failed, 1, "rank 1 exited with code 1");
    running = db.create_run({spec_hash, std::nullopt, "quickstart", t0 + std::chrono::hours(2)});
  }

  util::SubprocessResult expctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--db", db_path.string()});
    return run_expctl(args);
  }
};

}  // namespace

TEST_CASE("cli store: list prints an aligned table, newest first") {
  CliStore s;
  const auto result = s.expctl({"list"});
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.empty());
  const std::string expected_first_line =
      "id                      status     name        spec          started (UTC)        duration  tags";
  CHECK_THAT(result.out, Catch::StartsWith(expected_first_line + "\n"));
  const auto running_at = result.out.find(s.running.id);
  const auto failed_at = result.out.find(s.failed.id);
  const auto done_at = result.out.find(s.done.id);
  CHECK(running_at < failed_at);
  CHECK(failed_at < done_at);
  CHECK(done_at != std::string::npos);
  CHECK_THAT(result.out, Catch::Contains(s.done.id + "  completed  quickstart  " + s.spec_hash.substr(0, 12) +
                                         "  2026-11-01 10:00:00"));
  CHECK_THAT(result.out, Catch::Contains("baseline"));
}

TEST_CASE("cli store: list filters by status, tag, spec prefix and limit") {
  CliStore s;
  const auto failed = s.expctl({"list", "--status", "failed"});
  CHECK(failed.exit_code == 0);
  CHECK_THAT(failed.out, Catch::Contains(s.failed.id));
  CHECK_THAT(failed.out, !Catch::Contains(s.done.id));
  const auto tagged = s.expctl({"list", "--tag", "baseline"});
  CHECK_THAT(tagged.out, Catch::Contains(s.done.id));
  CHECK_THAT(tagged.out, !Catch::Contains(s.running.id));
  const auto by_spec = s.expctl({"list", "--spec", s.other_hash.substr(0, 6)});
  CHECK_THAT(by_spec.out, Catch::Contains(s.failed.id));
  CHECK_THAT(by_spec.out, !Catch::Contains(s.done.id));
  const auto limited = s.expctl({"list", "--limit", "1"});
  CHECK_THAT(limited.out, Catch::Contains(s.running.id));
  CHECK_THAT(limited.out, !Catch::Contains(s.failed.id));
  const auto none = s.expctl({"list", "--tag", "nosuchtag"});
  CHECK(none.exit_code == 0);
  CHECK_THAT(none.out, Catch::StartsWith("no runs match\nstore "));
  const auto bad_status = s.expctl({"list", "--status", "exploded"});
  CHECK(bad_status.exit_code == 2);
  const auto bad_prefix = s.expctl({"list", "--spec", "XYZ"});
  CHECK(bad_prefix.exit_code == 2);
  CHECK(bad_prefix.err == "expctl: error: spec hash prefix \"XYZ\" is not lowercase hex\n");
}

TEST_CASE("cli store: list --format json is a versioned array of run objects") {
  CliStore s;
  const auto result = s.expctl({"list", "--format", "json"});
  REQUIRE(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document["format_version"] == 1);
  CHECK(document["kind"] == "list");
  CHECK(document["database"] == fs::absolute(s.db_path).string());
  REQUIRE(document["runs"].size() == 3);
  const auto& oldest = document["runs"][2];
  CHECK(oldest["id"] == s.done.id);
  CHECK(oldest["name"] == "quickstart");
  CHECK(oldest["status"] == "completed");
  CHECK(oldest["spec_hash"] == s.spec_hash);
  CHECK(oldest["environment_hash"] == "env-1");
  CHECK(oldest["started_at"] == "2026-11-01T10:00:00.000Z");
  CHECK(oldest["ended_at"].is_string());
  CHECK(oldest["duration_s"].is_number());
  CHECK(oldest["exit_code"] == 0);
  CHECK(oldest["root_cause"] == "");
  CHECK(oldest["run_dir"] == s.done.run_dir.string());
  CHECK(oldest["tags"] == nlohmann::json::array({"baseline"}));
  const auto& newest = document["runs"][0];
  CHECK(newest["ended_at"].is_null());
  CHECK(newest["exit_code"].is_null());
  CHECK(newest["environment_hash"].is_null());
}

TEST_CASE("cli store: show takes a unique prefix and prints fields, ranks, artifacts, metrics and summary") {
  CliStore s;
  const auto result = s.expctl({"show", s.done.id.substr(0, 12)});
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("run          " + s.done.id + "\n"));
  CHECK_THAT(result.out, Catch::Contains("status       completed (exit 0)\n"));
  CHECK_THAT(result.out, Catch::Contains("spec         " + s.spec_hash + " (quickstart)\n"));
  CHECK_THAT(result.out, Catch::Contains("tags         baseline\n"));
  CHECK_THAT(result.out, Catch::Contains("checkpoints/step-2.pt"));
  CHECK_THAT(result.out, Catch::Contains("loss"));
  CHECK_THAT(result.out, Catch::Contains("2.5 (1)"));
  CHECK_THAT(result.out, Catch::Contains("0.75 (2)"));
  CHECK_THAT(result.out, Catch::Contains("eval_accuracy"));
  CHECK_THAT(result.out, Catch::Contains("node1"));

  const auto failed = s.expctl({"show", s.failed.id});
  CHECK_THAT(failed.out, Catch::Contains("root cause   rank 1 exited with code 1\n"));
  CHECK_THAT(failed.out, Catch::Contains("summary\n  (none yet)\n"));
}

TEST_CASE("cli store: show --format json has the run, summary, environment, ranks, artifacts and metrics") {
  CliStore s;
  const auto result = s.expctl({"show", s.done.id, "--format", "json"});
  REQUIRE(result.exit_code == 0);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document["format_version"] == 1);
  CHECK(document["kind"] == "show");
  CHECK(document["run"]["id"] == s.done.id);
  CHECK(document["spec"] == nlohmann::json{{"hash", s.spec_hash}, {"name", "quickstart"}});
  CHECK(document["summary"] == nlohmann::json{{"final_train_loss", 0.75}, {"eval_accuracy", 0.9}});
  CHECK(document["environment"]["torch"] == "1.13.1");
  REQUIRE(document["ranks"].size() == 2);
  CHECK(document["ranks"][1] == nlohmann::json{{"rank", 1},
                                               {"host", "node1"},
                                               {"pid", 101},
                                               {"environment_hash", nullptr},
                                               {"status", "completed"},
                                               {"exit_code", 0},
                                               {"signal", nullptr}});
  CHECK(document["artifacts"][0] ==
        nlohmann::json{{"path", "checkpoints/step-2.pt"}, {"sha256", std::string(64, 'c')}, {"size_bytes", 2048}});
  REQUIRE(document["metrics"].size() == 2);
  CHECK(document["metrics"][0]["name"] == "loss");
  CHECK(document["metrics"][0]["points"] == 2);
  CHECK(document["metrics"][0]["first_value"] == 2.5);
  CHECK(document["metrics"][0]["last_value"] == 0.75);

  const auto bare = nlohmann::json::parse(s.expctl({"show", s.running.id, "--format", "json"}).out);
  CHECK(bare["summary"] == nlohmann::json::object());
  CHECK(bare["environment"].is_null());
}

TEST_CASE("cli store: show of an unknown or ambiguous run exits 2 naming the selector") {
  CliStore s;
  const auto unknown = s.expctl({"show", "nosuchrun"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err ==
        "expctl: error: no run matches \"nosuchrun\" in " + s.db_path.string() + " (see 'expctl list' for run ids)\n");
  const auto ambiguous = s.expctl({"show", "2026"});
  CHECK(ambiguous.exit_code == 2);
  CHECK_THAT(ambiguous.err,
             Catch::StartsWith("expctl: error: run selector \"2026\" is ambiguous: it matches 3 runs ("));
}

TEST_CASE("cli store: a missing database lists no runs with a hint, and show refuses it without creating it") {
  test::TempDir dir;
  const std::string db = (dir / "none" / "expctl.db").string();
  const auto list = run_expctl({"--db", db, "list"});
  CHECK(list.exit_code == 0);
  CHECK(list.out == "no runs: no database at " + db +
                        " yet: runs are recorded there by 'expctl run' (pick another with --db PATH or EXPCTL_DB)\n");
  const auto json = run_expctl({"list", "--format", "json"}, {{"EXPCTL_DB", db}});
  CHECK(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.out)["runs"] == nlohmann::json::array());
  const auto show = run_expctl({"--db", db, "show", "abc"});
  CHECK(show.exit_code == 2);
  CHECK(show.err == "expctl: error: " + db +
                        ": no such database (runs are recorded by 'expctl run'; pick another with --db PATH or "
                        "EXPCTL_DB)\n");
  CHECK_FALSE(fs::exists(dir / "none"));
}

TEST_CASE("cli store: a database from a newer expctl is refused with exit 2") {
  CliStore s;
  const int newer = store::latest_schema_version() + 1;
  store::testing::execute_sql(s.db_path, fmt::format("PRAGMA user_version = {}", newer));
  for (const std::string command : {"list", "show"}) {
    std::vector<std::string> args{command};
    if (command == "show") {
      args.push_back(s.done.id);
    }
    const auto result = s.expctl(args);
    CHECK(result.exit_code == 2);
    CHECK(result.err == "expctl: error: " + s.db_path.string() + ": written by a newer expctl (schema v" +
                            std::to_string(newer) + ", this one reads up to v" +
                            std::to_string(store::latest_schema_version()) + "): upgrade expctl\n");
  }
}

TEST_CASE("cli store: a file that is not a database is refused by name and left unchanged") {
  test::TempDir dir;
  const fs::path notes = dir.write("notes.txt", "just some notes, not SQLite at all\n");
  const auto result = run_expctl({"--db", notes.string(), "list"});
  CHECK(result.exit_code == 2);
  CHECK(result.err == "expctl: error: " + notes.string() +
                          ": not an expctl database (the file is not SQLite): check --db / EXPCTL_DB\n");
  CHECK(util::read_file(notes).value() == "just some notes, not SQLite at all\n");
}

// Issue 41, observation 5: `show` rejected @latest and tag: that compare accepts, with a misleading
// "no run matches"; tag:X named only the newest run, so a group could not be selected again.
TEST_CASE("cli store: show, compare and export share one selector grammar with all:tag: groups and near-miss hints") {
  CliStore s;
  {
    auto db = store::Store::open(s.db_path);
    db.add_tag(s.done.id, "ab:x:a");
    db.add_tag(s.running.id, "ab:x:a");
  }
  const auto id_of = [&](const std::string& selector) {
    const auto shown = s.expctl({"show", selector, "--format", "json"});
    INFO(selector << ": " << shown.err);
    REQUIRE(shown.exit_code == 0);
    return nlohmann::json::parse(shown.out).at("run").at("id").get<std::string>();
  };
  CHECK(id_of("@latest") == s.running.id);
  CHECK(id_of("@latest~2") == s.done.id);
  CHECK(id_of("tag:baseline") == s.done.id);
  CHECK(id_of("tag:ab:x:a") == s.running.id);  // tag:NAME is still the newest: baselines select what they did
  CHECK(id_of("spec:" + s.other_hash.substr(0, 8)) == s.failed.id);

  const auto group = s.expctl({"show", "all:tag:ab:x:a"});
  CHECK(group.exit_code == 2);
  CHECK(group.err == "expctl: error: 'all:tag:ab:x:a' names 2 runs, and show takes one: name one run (tag:NAME is "
                     "the newest run with that tag, @latest the newest of all)\n");
  const fs::path tb = s.dir / "tb";
  const auto exported = s.expctl({"export", "tensorboard", "all:tag:ab:x:a", "-o", tb.string(), "--format", "json"});
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  const auto document = nlohmann::json::parse(exported.out);  // named: a range-for over a temporary's member dangles
  std::vector<std::string> ids;
  for (const auto& run : document.at("runs")) {
    ids.push_back(run.at("id"));
  }
  CHECK(ids == std::vector<std::string>{s.running.id, s.done.id});  // every run with the tag, newest first

  const auto typo = s.expctl({"show", "tag:basline"});
  CHECK(typo.exit_code == 2);
  CHECK(typo.err == "expctl: error: no run matches \"tag:basline\" in " + s.db_path.string() +
                        ": no run has this tag; the closest tags: tag:baseline (see 'expctl list' for run ids)\n");
  const auto near_id = s.expctl({"show", s.done.id.substr(0, 15) + "x"});
  CHECK(near_id.exit_code == 2);
  CHECK_THAT(near_id.err, Catch::Contains("; the closest run ids: ") && Catch::Contains(s.done.id));
}

// Issue 41, observation 8: no way to delete runs or reclaim space (`gc` answered "did you mean ab").
TEST_CASE("cli store: rm deletes runs with their folders, gc reclaims checkpoints orphans and old runs, list shows the size") {
  CliStore s;
  {
    auto db = store::Store::open(s.db_path);
    db.add_tag(s.done.id, "baseline:quickstart");
  }
  const fs::path checkpoint = s.done.run_dir / "checkpoints" / "step-2.pt";
  fs::create_directories(checkpoint.parent_path());
  std::ofstream(checkpoint) << std::string(2048, 'c');
  const fs::path orphan = s.done.run_dir.parent_path() / "20250101-000000-dead01";
  fs::create_directories(orphan / "logs");
  std::ofstream(orphan / "logs" / "rank-0.log") << std::string(1000, 'l');
  fs::last_write_time(orphan, fs::file_time_type::clock::now() - std::chrono::hours(2));

  const auto listed = s.expctl({"list"});
  CHECK_THAT(listed.out, Catch::Contains("store " + fs::absolute(s.db_path).string() + ": database ") &&
                             Catch::Contains(", run folders "));

  // A dry run lists what would go, with bytes, and removes nothing.
  const auto dry = s.expctl({"gc", "--older-than", "30d", "--dry-run"});
  INFO(dry.out << dry.err);
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.out, Catch::Contains("would remove run " + s.failed.id + " (cnn, failed, "));
  CHECK_THAT(dry.out, Catch::Contains("would remove checkpoints of " + s.done.id + " (1 file(s), 2.0 KiB)"));
  CHECK_THAT(dry.out, Catch::Contains("would remove orphaned folder " + orphan.string()));
  CHECK_THAT(dry.out, Catch::Contains("(dry run: nothing was removed)"));
  CHECK_THAT(dry.out, !Catch::Contains(s.running.id));  // running: never collected
  CHECK_THAT(dry.out, !Catch::Contains("would remove run " + s.done.id));  // a baseline: protected
  CHECK(fs::exists(checkpoint));
  CHECK(fs::exists(orphan));

  const auto gc = s.expctl({"gc", "--older-than", "30d", "--format", "json"});
  INFO(gc.out << gc.err);
  REQUIRE(gc.exit_code == 0);
  const auto document = nlohmann::json::parse(gc.out);
  CHECK(document.at("kind") == "gc");
  CHECK(document.at("removed").size() == 3);
  CHECK(document.at("bytes").get<std::int64_t>() >= 3048);
  CHECK_FALSE(fs::exists(checkpoint));
  CHECK_FALSE(fs::exists(orphan));
  CHECK_FALSE(fs::exists(s.failed.run_dir));
  {
    const auto db = store::Store::open(s.db_path, store::OpenMode::read_only);
    CHECK_FALSE(db.run(s.failed.id).has_value());
    CHECK(db.run(s.done.id).has_value());
    CHECK(db.artifacts(s.done.id).empty());  // the checkpoint's artifact row went with its file
  }

  // rm: a running run and a baseline are refused (nothing removed); --force removes the baseline.
  const auto running = s.expctl({"rm", s.running.id, s.done.id});
  CHECK(running.exit_code == 2);
  CHECK_THAT(running.err, Catch::StartsWith("expctl: error: run " + s.running.id + " is running"));
  const auto baseline = s.expctl({"rm", "tag:baseline:quickstart"});
  CHECK(baseline.exit_code == 2);
  CHECK_THAT(baseline.err, Catch::Contains("is a baseline (baseline:quickstart)") && Catch::Contains("--force"));
  CHECK(fs::exists(s.done.run_dir));
  const auto forced = s.expctl({"rm", "tag:baseline:quickstart", "--force"});
  INFO(forced.out << forced.err);
  CHECK(forced.exit_code == 0);
  CHECK_THAT(forced.out, Catch::StartsWith("removed run " + s.done.id + " (quickstart, completed, "));
  CHECK_FALSE(fs::exists(s.done.run_dir));
  const auto unknown = s.expctl({"rm", s.done.id});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Catch::StartsWith("expctl: error: no run matches"));
}

TEST_CASE("cli store: stored strings reach the terminal with their control characters escaped") {
  // A run name and root cause as a teammate's row (or a rank's last output lines) may hold
  // them: clear the screen, set the window title, write the clipboard (OSC 52), a C1 CSI.
  test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const std::string hash = util::sha256_hex("escapes");
  std::string id;
  {
    auto db = store::Store::open(db_path);
    db.put_spec(hash, R"({"name":"escapes"})", "escapes");
    const auto run = db.create_run({hash, std::nullopt, "evil\x1b[2Jname\x1b]52;c;cHduZWQ=\x07", std::nullopt});
    id = run.id;
    db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 1, "loss", 1.0}});
    db.finish_run(run.id, store::RunStatus::failed, 1,
                  "rank 0 said \x1b]0;title\x07 then\r\xc2\x9b"
                  "2J");
  }
  const auto expctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", db_path.string()});
    return run_expctl(args);
  };
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"list"}, {"show", id}, {"compare", id, id}, {"watch", id, "--once"}}) {
    const auto result = expctl(args);
    INFO(args.front() << "\n" << result.out << result.err);
    CHECK(!result.out.empty());
    for (const std::string& bytes : {result.out, result.err}) {
      CHECK(bytes.find('\x1b') == std::string::npos);
      CHECK(bytes.find('\x07') == std::string::npos);
      CHECK(bytes.find('\r') == std::string::npos);
      CHECK(bytes.find("\xc2\x9b") == std::string::npos);
    }
  }
  const auto shown = expctl({"show", id});
  CHECK(shown.out.find(R"(evil\x1b[2Jname\x1b]52;c;cHduZWQ=\x07)") != std::string::npos);  // readable, inert
  CHECK(shown.out.find(R"(rank 0 said \x1b]0;title\x07 then\r\u009b2J)") != std::string::npos);
  CHECK(expctl({"list"}).out.find(R"(evil\x1b[2Jname)") != std::string::npos);
}
