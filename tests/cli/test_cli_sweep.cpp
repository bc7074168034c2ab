// `expctl sweep`, `validate` and `hash` of sweep files through the real binary: skip-if-done,
// resume after Ctrl-C and after a crash, parallel slots and the ranks' CPU affinity, Slurm array
// tasks, the report. Points are tiny synthetic specs (tests/data/sweep/base.yaml).

#include <sched.h>

#include <algorithm>
#include <map>
#include <set>

#include "run_helpers.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using expctl::test::run_expctl;

namespace {

std::string sweep_data(const std::string& name) {
  return (test::source_dir() / "tests" / "data" / "sweep" / name).string();
}

/// tests/data/sweep's base.yaml and grid.yaml copied into `dir`: outside the source tree, the
/// code state (git commit, diff) that enters a run's environment hash is "none" and stays so
/// while other work changes the tree, so "done on this environment" is stable across the test.
std::string copy_grid(const test::TempDir& dir) {
  for (const char* name : {"base.yaml", "grid.yaml"}) {
    fs::copy_file(sweep_data(name), dir / name, fs::copy_options::overwrite_existing);
  }
  return (dir / "grid.yaml").string();
}

json point_hashes(const std::string& file) {
  const auto result = run_expctl({"hash", "--format", "json", file});
  REQUIRE(result.exit_code == 0);
  json hashes = json::array();
  const json document = parse_stdout(result);
  for (const auto& point : document["sweep"]["points"]) {
    hashes.push_back(point["hash"]);
  }
  return hashes;
}

/// A sweep over base.yaml in `dir` whose point 0 trains `long_steps` steps and point 1 20 steps.
fs::path long_then_short(const test::TempDir& dir, int long_steps) {
  copy_grid(dir);
  return dir.write("long.yaml", fmt::format("name: long\nbase: base.yaml\ngrid:\n  train.max_steps: [{}, 20]\n  "
                                            "train.eval_every: [0]\n",
                                            long_steps));
}

/// The store once expctl has created it.
std::optional<store::Store> try_open(const RunDir& run_dir) {
  if (!fs::exists(run_dir.db)) {
    return std::nullopt;
  }
  try {
    return run_dir.open();
  } catch (const util::StoreError&) {
    return std::nullopt;  // expctl is still creating the database
  }
}

std::optional<store::RunRecord> first_run(const RunDir& run_dir) {
  const auto db = try_open(run_dir);
  const auto runs = db ? db->list_runs() : std::vector<store::RunRecord>{};
  return runs.empty() ? std::nullopt : std::optional(runs.back());
}

std::string status_field(pid_t pid, const std::string& field) {
  const std::string text = read_text(fs::path("/proc") / std::to_string(pid) / "status");
  const size_t at = text.find(field + ":");
  if (at == std::string::npos) {
    return "";
  }
  const size_t start = text.find_first_not_of(" \t", at + field.size() + 1);
  return text.substr(start, text.find('\n', start) - start);
}

std::string environment_variable(pid_t pid, const std::string& name) {
  std::string text = read_text(fs::path("/proc") / std::to_string(pid) / "environ");
  std::replace(text.begin(), text.end(), '\0', '\n');
  const size_t at = text.find("\n" + name + "=");
  if (at == std::string::npos) {
    return "";
  }
  const size_t start = at + name.size() + 2;
  return text.substr(start, text.find('\n', start) - start);
}

std::map<std::string, std::optional<std::string>> array_task(const std::string& id) {
  return {{std::string("SLURM_ARRAY_TASK_ID"), id}};
}

}  // namespace

TEST_CASE("cli sweep: validate and hash list the points, each point's hash being the spec hash of its overrides") {
  const std::string file = (test::source_dir() / "experiments" / "sweep-quickstart.yaml").string();
  const auto validated = run_expctl({"validate", file});
  REQUIRE(validated.exit_code == 0);
  const auto hashed = run_expctl({"hash", "--format", "json", file});
  REQUIRE(hashed.exit_code == 0);
  const json document = parse_stdout(hashed);
  const std::string sweep_hash = document["hash"];
  const json& points = document["sweep"]["points"];
  REQUIRE(points.size() == 8);
  CHECK_THAT(validated.out, Catch::StartsWith("ok: " + file + " (sweep " + sweep_hash + ", 8 points)\n"));
  CHECK(std::count(validated.out.begin(), validated.out.end(), '\n') == 9);
  CHECK_THAT(validated.out, Catch::Contains("     5  " + points[5]["hash"].get<std::string>() +
                                            "  optim.lr=0.05 data.batch_size=32 seed=43\n"));
  std::set<std::string> distinct;
  for (const json& point : points) {
    distinct.insert(point["hash"].get<std::string>());
  }
  CHECK(distinct.size() == 8);
  std::vector<std::string> args{"hash", (test::source_dir() / "experiments" / "quickstart.yaml").string()};
  for (const json& item : points[5]["overrides"]) {
    args.insert(args.end(), {"--set", item.get<std::string>()});
  }
  const auto direct = run_expctl(args);
  CHECK(direct.out == points[5]["hash"].get<std::string>() + "\n");
  const auto text = run_expctl({"hash", file});
  CHECK_THAT(text.out, Catch::StartsWith(sweep_hash + "\n" + points[0]["hash"].get<std::string>() + "  point 0: "));
  const auto as_json = run_expctl({"validate", "--format", "json", file});
  CHECK(parse_stdout(as_json)["specs"][0]["kind"] == "sweep");
  CHECK(parse_stdout(as_json)["specs"][0]["points"].size() == 8);
}

TEST_CASE("cli sweep: compare takes a sweep file alone, and says so for a sweep with B or verdict options") {
  const RunDir run_dir;
  const std::string grid = copy_grid(run_dir.dir);
  const auto no_store = run_dir.expctl({"compare", grid});
  CHECK(no_store.exit_code == 2);
  CHECK_THAT(no_store.err, Catch::Contains("run the sweep first: expctl sweep"));
  const auto with_b = run_dir.expctl({"compare", grid, "@latest"});
  CHECK(with_b.exit_code == 2);
  CHECK_THAT(with_b.err, Catch::Contains("is a sweep file: compare it alone"));
  const auto threshold = run_dir.expctl({"compare", grid, "--threshold", "samples_per_sec=-3%"});
  CHECK(threshold.exit_code == 2);
  CHECK_THAT(threshold.err, Catch::Contains("a sweep's report has none"));
  const auto one_run = run_dir.expctl({"compare", "@latest"});
  CHECK(one_run.exit_code == 2);
  CHECK_THAT(one_run.err, Catch::Contains("compare needs a baseline A and a candidate B"));
  const auto metric = run_dir.expctl({"compare", "@latest", "@latest~1", "--metric", "eval_loss"});
  CHECK(metric.exit_code == 2);
  CHECK_THAT(metric.err, Catch::Contains("--metric chooses the columns of a sweep's report"));
}

TEST_CASE("cli sweep: a bad sweep file prints every problem with its position and exits 2") {
  const test::TempDir dir;
  const auto bad = dir.write("bad.yaml", "base: " + sweep_data("base.yaml") + "\ngrid:\n  optim.lr: [0.1, x]\n");
  const auto validated = run_expctl({"validate", bad.string()});
  CHECK(validated.exit_code == 2);
  CHECK(validated.err == "expctl: error: " + bad.string() +
                             ":3:19: optim.lr must be a float, found \"x\"\n"
                             "    3 |   optim.lr: [0.1, x]\n"
                             "      |                   ^\n");
  const RunDir run_dir;
  CHECK(run_dir.expctl({"sweep", bad.string()}).exit_code == 2);
  const auto spec = run_dir.expctl({"sweep", sweep_data("base.yaml")});
  CHECK(spec.exit_code == 2);
  CHECK_THAT(spec.err, Catch::Contains("is not a sweep file (it has no top-level \"base:\" key)"));
  CHECK_FALSE(fs::exists(run_dir.db));
}

TEST_CASE("cli sweep: a 2x2x2 sweep runs 8 points - stopped after 3 it runs only the other 5, then none") {
  const RunDir run_dir;
  const std::string grid = copy_grid(run_dir.dir);
  const json hashes = point_hashes(grid);
  const auto first = run_dir.expctl({"sweep", grid, "--limit", "3", "--format", "json"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const json jobs = parse_stdout(first)["jobs"];
  REQUIRE(jobs.size() == 3);
  CHECK(jobs[2]["point"] == 2);
  CHECK(run_dir.open().list_runs({.status = store::RunStatus::completed}).size() == 3);

  const auto second = run_dir.expctl({"sweep", grid, "--format", "json"});
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  const json rest = parse_stdout(second);
  CHECK(rest["done_before"] == 3);
  REQUIRE(rest["jobs"].size() == 5);
  for (size_t i = 0; i < 5; ++i) {
    CHECK(rest["jobs"][i]["point"] == i + 3);
    CHECK(rest["jobs"][i]["exit_code"] == 0);
    CHECK(rest["jobs"][i]["resumed"] == false);
  }

  const auto third = run_dir.expctl({"sweep", grid});
  CHECK(third.exit_code == 0);
  CHECK_THAT(third.err, Catch::Contains("8 runs; 8 done, 0 to run"));
  const auto runs = run_dir.open().list_runs();
  REQUIRE(runs.size() == 8);
  const std::string sweep_hash = parse_stdout(second)["sweep"]["hash"];
  std::set<std::string> stored;
  for (const auto& run : runs) {
    CHECK(run.status == store::RunStatus::completed);
    CHECK(std::count(run.tags.begin(), run.tags.end(), "sweep:grid") == 1);
    CHECK(std::count(run.tags.begin(), run.tags.end(), "sweep-hash:" + sweep_hash) == 1);
    stored.insert(run.spec_hash);
  }
  CHECK(stored == std::set<std::string>(hashes.begin(), hashes.end()));

  // The report: one row per (lr, batch size), the two seeds of each together.
  const auto report = run_dir.expctl({"sweep", grid, "--report", "--format", "json"});
  REQUIRE(report.exit_code == 0);
  const json document = parse_stdout(report);
  REQUIRE(document["configurations"].size() == 4);
  for (const json& configuration : document["configurations"]) {
    CHECK(configuration["runs"].size() == 2);
    CHECK(configuration["metrics"]["final_train_loss"]["n"] == 2);
  }
  CHECK(document["best"].contains("final_train_loss"));
  const auto html = run_dir.expctl({"sweep", grid, "--report", "--format", "html"});
  CHECK_THAT(html.out, Catch::Contains("<svg id=\"plot-final_train_loss-optim-lr\""));
  const auto text = run_dir.expctl({"sweep", grid, "--report"});
  CHECK_THAT(text.out, Catch::Contains("8 of 8 runs completed") && Catch::Contains("best final_train_loss"));
  // The same through compare: one argument, the sweep file; every format, byte for byte.
  for (const char* format : {"text", "json", "markdown", "html"}) {
    const auto through_compare = run_dir.expctl({"compare", grid, "--format", format, "--metric", "final_train_loss"});
    INFO(format << ": " << through_compare.err);
    CHECK(through_compare.exit_code == 0);
    CHECK(through_compare.out ==
          run_dir.expctl({"sweep", grid, "--report", "--format", format, "--metric", "final_train_loss"}).out);
  }
  CHECK(parse_stdout(run_dir.expctl({"compare", grid, "--format", "json"}))["configurations"].size() == 4);
  // --force runs a done point again.
  const auto forced = run_dir.expctl({"sweep", grid, "--force", "--point", "0", "--dry-run", "--format", "json"});
  CHECK(parse_stdout(forced)["jobs"].size() == 1);
}

TEST_CASE("cli sweep: Ctrl-C stops the sweep, the next one resumes the interrupted point under its run id") {
  const RunDir run_dir;
  const auto file = long_then_short(run_dir.dir, 1500);
  Background sweep(run_dir.argv({"sweep", file.string()}), run_dir.dir / "sweep");
  REQUIRE(eventually([&] { return first_run(run_dir).has_value(); }));
  const store::RunRecord interrupted = *first_run(run_dir);
  wait_for_training(interrupted);
  ::kill(sweep.pid(), SIGINT);
  CHECK(sweep.wait() == 130);
  INFO(sweep.err());
  CHECK_THAT(sweep.err(), Catch::Contains("SIGINT received: no new point starts"));
  REQUIRE(run_dir.open().list_runs().size() == 1);
  CHECK(run_dir.open().run(interrupted.id)->status == store::RunStatus::interrupted);

  const auto plan = run_dir.expctl({"sweep", file.string(), "--dry-run", "--format", "json"});
  const json jobs = parse_stdout(plan)["jobs"];
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0]["resume_run"] == interrupted.id);
  CHECK(jobs[1]["resume_run"].is_null());

  const auto resumed = run_dir.expctl({"sweep", file.string(), "--format", "json"});
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json done = parse_stdout(resumed)["jobs"];
  CHECK(done[0]["resumed"] == true);
  CHECK(done[0]["run_id"] == interrupted.id);
  const auto runs = run_dir.open().list_runs();
  REQUIRE(runs.size() == 2);
  for (const auto& run : runs) {
    CHECK(run.status == store::RunStatus::completed);
  }
}

// The next sweep's plan is checked, not run: its long point has 100000 steps. That a resumed point
// continues under its run id is the Ctrl-C case's end above.
TEST_CASE(
    "cli sweep: a killed sweep leaves its running point interrupted, never orphaned, and the next one plans to "
    "resume it") {
  const RunDir run_dir;
  const auto file = long_then_short(run_dir.dir, 100000);
  Background sweep(run_dir.argv({"sweep", file.string()}), run_dir.dir / "sweep");
  REQUIRE(eventually([&] { return first_run(run_dir).has_value(); }));
  const store::RunRecord run = *first_run(run_dir);
  wait_for_training(run);
  ::kill(sweep.pid(), SIGKILL);
  CHECK(sweep.wait() == 128 + SIGKILL);
  // The point's expctl run gets SIGTERM when the sweep dies: it checkpoints and ends interrupted.
  CHECK(eventually([&] { return run_dir.open().run(run.id)->status == store::RunStatus::interrupted; }));
  const auto plan = run_dir.expctl({"sweep", file.string(), "--dry-run", "--format", "json"});
  CHECK(parse_stdout(plan)["jobs"][0]["resume_run"] == run.id);
}

TEST_CASE("cli sweep: --parallel 2 runs two points at once, the ranks of each slot on one core of their own") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  if (CPU_COUNT(&set) < 2) {
    test::skip("cores", "--parallel 2 needs 2 cores, this test may use " + std::to_string(CPU_COUNT(&set)));
    return;
  }
  const RunDir run_dir;
  copy_grid(run_dir.dir);
  const auto file = run_dir.dir.write(
      "two.yaml", "name: two\nbase: base.yaml\nset:\n  train.max_steps: 100000\n  train.eval_every: 0\ngrid:\n  seed: [1, 2]\n");
  Background sweep(run_dir.argv({"sweep", file.string(), "--parallel", "2"}), run_dir.dir / "sweep");
  // Both points running, each with its two ranks alive.
  std::map<std::string, std::set<std::string>> cores_of_run;
  std::map<std::string, std::set<std::string>> threads_of_run;
  const auto both_running = [&] {
    cores_of_run.clear();
    threads_of_run.clear();
    const auto db = try_open(run_dir);
    if (!db) {
      return false;
    }
    size_t ranks = 0;
    for (const auto& run : db->list_runs({.status = store::RunStatus::running})) {
      for (const auto& rank : db->ranks(run.id)) {
        const auto pid = static_cast<pid_t>(rank.pid.value_or(0));
        const std::string cores = pid > 0 ? status_field(pid, "Cpus_allowed_list") : "";
        if (!cores.empty()) {
          cores_of_run[run.id].insert(cores);
          threads_of_run[run.id].insert(environment_variable(pid, "OMP_NUM_THREADS"));
          ++ranks;
        }
      }
    }
    return cores_of_run.size() == 2 && ranks == 4;
  };
  REQUIRE(eventually(both_running));
  std::set<std::string> all_cores;
  for (const auto& [run, cores] : cores_of_run) {
    INFO("run " << run);
    REQUIRE(cores.size() == 1);  // both ranks of a point on the same cores
    CHECK(cores.begin()->find_first_of(",-") == std::string::npos);  // one core
    CHECK(threads_of_run[run] == std::set<std::string>{"1"});
    all_cores.insert(*cores.begin());
  }
  CHECK(all_cores.size() == 2);  // the slots do not share a core
  ::kill(sweep.pid(), SIGINT);
  CHECK(sweep.wait() == 130);
  for (const auto& run : run_dir.open().list_runs()) {
    CHECK(run.status == store::RunStatus::interrupted);
  }
}

TEST_CASE("cli sweep: SLURM_ARRAY_TASK_ID selects the point an array task runs") {
  const RunDir run_dir;
  const std::string grid = copy_grid(run_dir.dir);
  const json hashes = point_hashes(grid);
  const auto plan = test::run_expctl({"--db", run_dir.db.string(), "sweep", grid, "--dry-run", "--format", "json"},
                                     array_task("5"));
  REQUIRE(plan.exit_code == 0);
  const json document = parse_stdout(plan);
  CHECK(document["points"] == json{5});
  REQUIRE(document["jobs"].size() == 1);
  CHECK(document["jobs"][0]["hash"] == hashes[5]);

  const auto ran = test::run_expctl({"--db", run_dir.db.string(), "sweep", grid}, array_task("1"));
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  const auto runs = run_dir.open().list_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].spec_hash == hashes[1]);
  CHECK(std::count(runs[0].tags.begin(), runs[0].tags.end(), "sweep-point:1") == 1);

  const auto out_of_range = run_dir.expctl({"sweep", grid, "--point", "8"});
  CHECK(out_of_range.exit_code == 2);
  CHECK_THAT(out_of_range.err, Catch::Contains("point 8 is out of range: sweep grid has 8 points (0..7)"));
  const auto bad = test::run_expctl({"--db", run_dir.db.string(), "sweep", grid, "--dry-run"},
                                    array_task("x"));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("SLURM_ARRAY_TASK_ID=\"x\" is not a point index"));
}

TEST_CASE("cli sweep: --print-sbatch writes the job-array script of the golden file") {
  const auto result = test::run_expctl({"--db", "results/expctl.db", "sweep", "tests/data/sweep/grid.yaml",
                                        "--print-sbatch", "--array-limit", "2", "--sbatch=--partition=cpu",
                                        "--sbatch=--time=00:10:00"},
                                       {}, test::source_dir().string());
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  std::string script = result.out;
  const std::string binary = fs::canonical(test::expctl_binary()).string();
  for (size_t at = script.find(binary); at != std::string::npos; at = script.find(binary)) {
    script.replace(at, binary.size(), "/opt/expctl/bin/expctl");
  }
  CHECK(script == read_text(sweep_data("grid.sbatch")));
}

TEST_CASE("cli sweep: --print-sbatch with a server as --db puts the tasks' stores beside the node's store and never "
          "writes the server's connection string") {
  // No server is reached: the script is only written. Its password must not be in it.
  const test::TempDir dir;
  const std::string server = "host=/nonexistent port=5432 user=alice dbname=team password=hunter2-sbatch";
  const auto result = test::run_expctl({"--db", server, "--local-db", (dir / "node" / "expctl.db").string(), "sweep",
                                        "tests/data/sweep/grid.yaml", "--print-sbatch"},
                                       {}, test::source_dir().string());
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("hunter2") == std::string::npos);
  CHECK(result.out.find("host=") == std::string::npos);
  CHECK_THAT(result.out, Catch::Contains((dir / "node" / "sweep-grid").string() + "/task-*.db --into \"$EXPCTL_DB\""));
  CHECK_THAT(result.out, Catch::Contains("--db '" + (dir / "node" / "sweep-grid").string() + "'/task-"));
}
