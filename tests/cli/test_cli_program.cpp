// A team's own training program under `expctl run` (docs/program.md): the canonical PyTorch DDP
// script of experiments/python-ddp (Debian's python3-torch, Gloo on CPU, 2 ranks) and small
// programs that misbehave on purpose. Real processes; everything started here ends here.
#include <cmath>

#include <sys/stat.h>

#include "cli/run_helpers.hpp"

#include "expctl/spec/program.hpp"
#include "expctl/util/sandbox.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using expctl::test::run_expctl;

namespace {

/// A copy of experiments/python-ddp in a temporary folder (so a test may edit the script).
struct DdpExperiment {
  RunDir d;
  fs::path dir = d.dir / "python-ddp";
  fs::path spec = dir / "ddp.yaml";
  DdpExperiment() {
    fs::create_directories(dir);
    for (const char* file : {"ddp.yaml", "train.py"}) {
      fs::copy_file(test::source_dir() / "experiments" / "python-ddp" / file, dir / file);
    }
  }
  util::SubprocessResult run(std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"run", spec.string(), "--format", "json"};
    args.insert(args.end(), more.begin(), more.end());
    return d.expctl(args);
  }
};

/// A program spec around `script` (an executable file written to the folder) on `ranks` ranks.
struct SmallProgram {
  RunDir d;
  fs::path spec;
  /// `program_extra`: more of the program section ("  env: {A: b}\n").
  SmallProgram(const std::string& script, int ranks = 2, const std::string& extra = "",
               const std::string& program_extra = "") {
    const auto file = d.dir.write("prog.sh", "#!/bin/sh\n" + script);
    ::chmod(file.c_str(), 0755);
    spec = d.dir.write("prog.yaml", "distributed:\n  nproc_per_node: " + std::to_string(ranks) + "\n" + extra +
                                        "program:\n  command: [./prog.sh]\n" + program_extra);
  }
  util::SubprocessResult run(std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {"run", spec.string(), "--format", "json"};
    args.insert(args.end(), more.begin(), more.end());
    return d.expctl(args);
  }
};

json summary_of(const util::SubprocessResult& result) { return parse_stdout(result).at("summary"); }

}  // namespace

TEST_CASE("program: the DDP script completes, every rank's steps are stored, and a rerun is bitwise equal") {
  const DdpExperiment e;
  const auto first = e.run();
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const json summary = summary_of(first);
  for (const char* field : {"final_train_loss", "samples_per_sec", "step_time_ms_p50", "loss_curve_sha256",
                            "eval_accuracy"}) {
    INFO(field);
    CHECK_FALSE(summary.at(field).is_null());
  }
  CHECK(summary.at("steps") == 64);  // 2048 samples / 2 ranks / 32 per batch, 2 epochs
  CHECK(summary.at("eval_accuracy").get<double>() > 0.6);
  CHECK(summary.at("program").at("lines_skipped") == 0);
  const std::string id = parse_stdout(first).at("run").at("id");
  const auto db = e.d.open();
  for (const int rank : {0, 1}) {
    CHECK(series(db, id, "loss", rank).size() == 64);
    CHECK(series(db, id, "samples_per_sec", rank).size() == 63);  // from the second step's timestamp on
  }
  const auto run = *db.run(id);
  CHECK(fs::exists(run.run_dir / "logs" / "rank-1.log"));
  CHECK(fs::exists(run.run_dir / "checkpoints" / "checkpoint.pt"));

  const auto second = e.run();
  REQUIRE(second.exit_code == 0);
  CHECK(sha_of(parse_stdout(second)) == sha_of(parse_stdout(first)));
  const std::string other = parse_stdout(second).at("run").at("id");
  for (const int rank : {0, 1}) {
    CHECK(series(e.d.open(), other, "loss", rank) == series(db, id, "loss", rank));
  }
  const auto compared = e.d.expctl({"compare", id, other});
  INFO(compared.out << compared.err);
  CHECK(compared.exit_code == 0);
  // The readers of built-in runs read program runs as they are.
  const auto exported = e.d.expctl({"export", "tensorboard", id, "-o", (e.d.dir / "tb").string()});
  INFO(exported.out << exported.err);
  CHECK(exported.exit_code == 0);
  CHECK(fs::exists(e.d.dir / "tb" / id / "rank1"));
  const auto watched = e.d.expctl({"watch", id, "--format", "json"});
  REQUIRE(watched.exit_code == 0);
  const json view = json::parse(watched.out.substr(0, watched.out.find('\n')));
  CHECK(view.at("ranks").size() == 2);
  CHECK(view.at("ranks").at(1).at("step") == 64);
}

TEST_CASE("program: editing the script changes the spec hash, params and --set do too") {
  const DdpExperiment e;
  const auto hash = [&](std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"validate", e.spec.string(), "--format", "json"};
    args.insert(args.end(), more.begin(), more.end());
    const auto result = run_expctl(args);
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return json::parse(result.out).at("specs").at(0).at("hash").get<std::string>();
  };
  const std::string before = hash();
  CHECK(hash({"--set", "program.params.lr=0.1"}) != before);
  std::ofstream(e.dir / "train.py", std::ios::app) << "# edited\n";
  CHECK(hash() != before);
}

TEST_CASE("program: ab with --set-b program.params.batch_size=8 reports the slowdown") {
  const DdpExperiment e;
  const auto result = e.d.expctl({"ab", e.spec.string(), e.spec.string(), "--repeat", "5", "--set",
                                  "program.params.epochs=1", "--set-b", "program.params.batch_size=8", "--format",
                                  "json"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.out, Catch::Contains("samples_per_sec") && Catch::Contains("regression"));
}

TEST_CASE("program: a sweep over program.params.lr runs every point and reports") {
  const DdpExperiment e;
  const auto sweep = e.d.dir.write("lr.yaml", "name: lr\nbase: python-ddp/ddp.yaml\nset:\n  program.params.epochs: 1\n"
                                               "grid:\n  program.params.lr: [0.02, 0.1]\n");
  const auto ran = e.d.expctl({"sweep", sweep.string(), "--format", "json"});
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  CHECK(parse_stdout(ran).at("jobs").size() == 2);
  const auto report = e.d.expctl({"sweep", sweep.string(), "--report", "--format", "json"});
  REQUIRE(report.exit_code == 0);
  const json document = parse_stdout(report);
  CHECK(document.at("configurations").size() == 2);
  CHECK(document.at("best").contains("final_train_loss"));
}

TEST_CASE("program: a killed rank fails the run fast and is named, resume continues from the program's checkpoint") {
  const DdpExperiment e;
  const auto killed = e.run({"--set", "program.params.kill_rank1_at_step=40"});  // after the epoch-1 checkpoint
  INFO(killed.err);
  CHECK(killed.exit_code == 1);
  const json document = parse_stdout(killed);
  CHECK_THAT(document.at("run").at("root_cause").get<std::string>(), Catch::StartsWith("rank 1 was killed by SIGKILL"));
  CHECK(document.at("run").at("status") == "failed");
  const std::string id = document.at("run").at("id");

  const auto resumed = e.d.expctl({"resume", id, "--format", "json"});
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const auto run = *e.d.open().run(id);
  CHECK(run.status == store::RunStatus::completed);
  CHECK_THAT(read_text(run.run_dir / "logs" / "rank-0.log"), Catch::Contains("resumed after epoch 0 (step 32)"));
  // The program restarts from its checkpoint: the curve is the one of a run never killed.
  const auto whole = e.run({"--set", "program.params.kill_rank1_at_step=40"});  // a new run: step 40 kills again
  CHECK(whole.exit_code == 1);
  const auto clean = e.run();
  REQUIRE(clean.exit_code == 0);
  CHECK(summary_of(resumed).at("loss_curve_sha256") == summary_of(clean).at("loss_curve_sha256"));
}

TEST_CASE("program faults: a command that is not found exits 2 before any rank starts") {
  RunDir d;
  d.dir.write("train.py", "");
  const auto spec = d.dir.write("p.yaml", "program:\n  command: [no-such-program-xyz, train.py]\n");
  const auto result = d.expctl({"run", spec.string()});
  CHECK(result.exit_code == 2);
  CHECK(result.err == "expctl: error: " + spec.string() +
                          ": cannot run program.command[0]: \"no-such-program-xyz\" is not found in PATH (" +
                          std::getenv("PATH") + "): install it, or give its full path; no rank was started\n");
  CHECK_FALSE(fs::exists(d.db));
  const auto file = d.dir.write("not-exec.sh", "#!/bin/sh\n");
  const auto spec2 = d.dir.write("q.yaml", "program:\n  command: [./not-exec.sh]\n");
  const auto refused = d.expctl({"run", spec2.string()});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("\"./not-exec.sh\" is not an executable file: chmod +x it"));
}

TEST_CASE("program faults: a rank exiting non-zero fails the run with its last stderr lines") {
  // Rank 0 sleeps 30 s; the run must end well before (both scaled by EXPCTL_TEST_TIMEOUT_SCALE).
  const int scale = test::timeout_scale();
  const SmallProgram p("if [ \"$RANK\" = 1 ]; then echo 'Traceback: boom' >&2; exit 3; fi\nsleep " +
                       std::to_string(30 * scale) + "\n");
  const auto started = std::chrono::steady_clock::now();
  const auto result = p.run();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20) * scale);  // rank 0's sleep was cut short
  INFO(result.err);
  CHECK(result.exit_code == 1);
  const json run = parse_stdout(result).at("run");
  CHECK(run.at("status") == "failed");
  CHECK(run.at("root_cause") == "rank 1 exited with code 3\nlast lines of rank 1:\n  Traceback: boom");
}

// distributed.max_restarts (docs/run.md, "Restarts"): a program's ranks start again as on `resume`,
// with EXPCTL_RESUME=1; here rank 1 kills itself only when it was not resumed.
TEST_CASE("program faults: with max_restarts a rank killed by SIGKILL restarts the program with EXPCTL_RESUME=1") {
  const SmallProgram p(
      "for s in 1 2 3; do echo \"{\\\"step\\\": $s, \\\"loss\\\": 1.0}\" >&3; done\n"
      "if [ \"$RANK\" = 1 ] && [ \"$EXPCTL_RESUME\" != 1 ]; then kill -9 $$; fi\n",
      2, "  max_restarts: 1\n");
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(parse_stdout(result).at("run").at("status") == "completed");
  const json summary = summary_of(result);
  CHECK(summary.at("invocations") == 2);
  CHECK_THAT(summary.at("invocation_causes").at("2").get<std::string>(),
             Catch::StartsWith("restart 1 of 1: rank 1 was killed by SIGKILL") &&
                 Catch::EndsWith("; its program starts again with EXPCTL_RESUME=1"));
  CHECK_THAT(result.err, Catch::Contains(" restarted (restart 1 of 1: rank 1 was killed by SIGKILL"));
}

TEST_CASE("program faults: garbage and over-long lines are skipped with a warning naming the rank") {
  const SmallProgram p(
      "echo 'not json' >&3\n"
      "head -c 70000 /dev/zero | tr '\\0' 'x' >&3; echo >&3\n"
      "echo '{\"step\": 1, \"loss\": 2.5, \"samples\": 4}' >&3\n"
      "echo '{\"step\": 2, \"loss\": 1.5, \"samples\": 4, \"accuracy\": 0.5}' >&3\n",
      1);
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.err, Catch::Contains("warning: rank 0 wrote a line that is not the metrics protocol (not JSON); "
                                         "skipped"));
  CHECK_THAT(result.err, Catch::Contains("(a line of 70000 bytes, over the 64 KiB limit)"));
  const json summary = summary_of(result);
  CHECK(summary.at("program").at("lines_skipped") == 2);
  CHECK(summary.at("final_train_loss") == 1.5);
  const std::string id = parse_stdout(result).at("run").at("id");
  CHECK(series(p.d.open(), id, "accuracy", 0).at(2) == 0.5);
}

TEST_CASE("program faults: a program that logs nothing completes and its summary says so") {
  const SmallProgram p("exit 0\n");
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const json summary = summary_of(result);
  CHECK(summary.at("final_train_loss").is_null());
  CHECK_THAT(summary.at("program").at("note").get<std::string>(), Catch::Contains("logged no metrics"));
}

TEST_CASE("program faults: NaN and Infinity are kept as values") {
  const SmallProgram p(
      "echo '{\"step\": 1, \"loss\": NaN}' >&3\necho '{\"step\": 2, \"loss\": Infinity, \"g\": -Infinity}' >&3\n", 1);
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::string id = parse_stdout(result).at("run").at("id");
  const auto loss = series(p.d.open(), id, "loss", 0);
  REQUIRE(loss.size() == 2);
  CHECK(std::isnan(loss.at(1)));
  CHECK(loss.at(2) == INFINITY);
  CHECK(series(p.d.open(), id, "g", 0).at(2) == -INFINITY);
}

TEST_CASE("program faults: a hung rank is named after distributed.timeout_s, with its last lines") {
  // Rank 1 logs a step through the expctl module, then its main thread hangs: the module's
  // heartbeats stop, and after timeout_s (2 s) the run fails naming it; rank 0 keeps beating.
  RunDir d;
  d.dir.write("hang.py",
              "import os, time, expctl\n"
              "expctl.log(1, loss=1.0)\n"
              "print('rank', os.environ['RANK'], 'waiting', flush=True)\n"
              "if os.environ['RANK'] == '1':\n    time.sleep(600)\n"
              "for step in range(2, 400):\n    expctl.log(step, loss=1.0)\n    time.sleep(0.05)\n");
  const auto spec = d.dir.write("hang.yaml", "distributed:\n  nproc_per_node: 2\n  timeout_s: 2\n"
                                             "program:\n  command: [/usr/bin/python3, hang.py]\n");
  const auto started = std::chrono::steady_clock::now();
  const auto result = d.expctl({"run", spec.string()});
  // The hung rank sleeps 600 s: any limit far below that shows it was cut off.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(15) * test::timeout_scale());
  INFO(result.err);
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.out, Catch::Contains("failed: rank 1 stopped answering (no heartbeat for 2 s); last steps: rank "
                                         "0 at ") &&
                             Catch::Contains("rank 1 at 1; ") && Catch::Contains("last lines of rank 1:\n  rank 1 waiting"));
}

TEST_CASE("program faults: Ctrl-C or SIGTERM to expctl run interrupts the program's ranks and exits 130") {
  for (const int signal : {SIGINT, SIGTERM}) {
    CAPTURE(signal);
    RunDir d;
    const auto file = d.dir.write("prog.sh", "#!/bin/sh\necho started\nexec sleep 60\n");
    ::chmod(file.c_str(), 0755);
    const auto spec = d.dir.write("p.yaml", "distributed:\n  nproc_per_node: 2\nprogram:\n  command: [./prog.sh]\n");
    Background expctl(d.argv({"run", spec.string()}), d.dir / "interrupted");
    std::optional<store::RunRecord> run;
    REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
    REQUIRE(eventually(
        [&] { return read_text(run->run_dir / "logs" / "rank-1.log").find("started") != std::string::npos; }));
    REQUIRE(::kill(expctl.pid(), signal) == 0);
    CHECK(expctl.wait(std::chrono::seconds(30)) == 130);
    const auto stored = d.open().run(run->id);
    CHECK(stored->status == store::RunStatus::interrupted);
    CHECK_THAT(stored->root_cause, Catch::Contains(signal == SIGINT ? "SIGINT" : "SIGTERM"));
  }
}

TEST_CASE("program: a pinned Python that differs is refused with exit 3 unless --allow-drift, and the run says so") {
  RunDir d;
  d.dir.write("prog.py", "import expctl\nexpctl.log(1, loss=0.5)\n");
  d.dir.write("py.toml", "[python]\nversion = \"2.7.*\"\n[python.packages]\nno-such-package-xyz = \"*\"\n");
  const auto spec = d.dir.write("p.yaml", "env: py.toml\nprogram:\n  command: [/usr/bin/python3, prog.py]\n");
  const auto refused = d.expctl({"run", spec.string()});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 3);
  CHECK_THAT(refused.out + refused.err, Catch::Contains("python.version") && Catch::Contains("2 of 2 pins differ"));
  CHECK_FALSE(fs::exists(d.db));
  const auto allowed = d.expctl({"run", spec.string(), "--allow-drift", "--format", "json"});
  INFO(allowed.err);
  REQUIRE(allowed.exit_code == 0);
  const json document = parse_stdout(allowed);
  CHECK(document.at("summary").at("drift").size() == 2);
  const auto tags = document.at("run").at("tags");
  CHECK(std::find(tags.begin(), tags.end(), "drift:python.version") != tags.end());
}

TEST_CASE("program: argv[0] is looked up in program.env's PATH, which the rank also gets") {
  RunDir d;
  const auto tool = d.dir.write("bin/mytrainer", "#!/bin/sh\necho \"{\\\"step\\\": 1, \\\"loss\\\": 0.25}\" >&$EXPCTL_METRICS_FD\n");
  ::chmod(tool.c_str(), 0755);
  const auto spec = d.dir.write("p.yaml", "program:\n  command: [mytrainer]\n  env:\n    PATH: " +
                                              (d.dir / "bin").string() + ":/usr/bin:/bin\n");
  const auto result = d.expctl({"run", spec.string(), "--format", "json"});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(summary_of(result).at("final_train_loss") == 0.25);
}

TEST_CASE("program: phases the program did not time show as not measured, never as 0 %") {
  // The program logs its forward time only: the other phases and "other" are unknown.
  const SmallProgram p("for s in 1 2 3; do echo \"{\\\"step\\\": $s, \\\"loss\\\": 1.0, \\\"forward_ms\\\": 2}\" >&3; "
                       "sleep 0.05; done\n",
                       1);
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const json summary = summary_of(result);
  CHECK(summary.at("comm_wait_fraction").is_null());
  const json& shares = summary.at("phases").at(0).at("shares");
  CHECK(shares.at("forward").get<double>() > 0.0);
  for (const char* phase : {"data", "backward", "comm", "optimizer", "other"}) {
    INFO(phase);
    CHECK(shares.at(phase).is_null());
  }
  const std::string id = parse_stdout(result).at("run").at("id");
  const auto shown = p.d.expctl({"show", id});
  REQUIRE(shown.exit_code == 0);
  CHECK_THAT(shown.out, Catch::Contains("n/a") && !Catch::Contains(" 0.0%"));
  const auto watched = p.d.expctl({"watch", id, "--format", "json"});
  REQUIRE(watched.exit_code == 0);
  const json view = json::parse(watched.out.substr(0, watched.out.find('\n')));
  CHECK(view.at("ranks").at(0).at("phase_shares").at("comm").is_null());
  CHECK(view.at("ranks").at(0).at("phase_shares").at("forward").get<double>() > 0.0);
}

TEST_CASE("program: --set, a nightly entry's set and ab naming an undeclared parameter exit 2 before any run") {
  const SmallProgram p("exit 0\n", 1, "");
  p.d.dir.write("prog.yaml",
                "distributed:\n  nproc_per_node: 1\nprogram:\n  command: [./prog.sh]\n"
                "  params: {lr: 0.05, batch_size: 32}\n");
  const auto run = p.run({"--set", "program.params.learning_rate=0.1"});
  CHECK(run.exit_code == 2);
  CHECK(run.err ==
        "expctl: error: --set program.params.learning_rate=0.1: unknown parameter \"learning_rate\" in "
        "\"program.params\": the spec declares batch_size, lr; a new parameter is declared under "
        "program.params in the spec file\n");
  const auto suite =
      p.d.dir.write("suite.yaml", "suite: s\nspecs:\n  - spec: prog.yaml\n    set: [program.params.lrr=0.1]\n");
  const auto night = p.d.expctl({"nightly", suite.string(), "--junit", "-", "--summary", "-"});
  CHECK(night.exit_code == 2);
  CHECK_THAT(night.err, Catch::Contains("unknown parameter \"lrr\" in \"program.params\" (did you mean \"lr\"?)"));
  const auto ab = p.d.expctl({"ab", p.spec.string(), p.spec.string(), "--set-b", "program.params.batchsize=8"});
  CHECK(ab.exit_code == 2);
  CHECK_THAT(ab.err, Catch::Contains("(did you mean \"batch_size\"?)"));
  CHECK_FALSE((fs::exists(p.d.db) && !p.d.open().list_runs().empty()));
}

TEST_CASE("program: show and ab hold a program run's spec without the built-in trainer's settings") {
  const SmallProgram p(
      "for s in 1 2 3; do echo \"{\\\"step\\\": $s, \\\"loss\\\": 1.0, \\\"samples\\\": 8}\" >&3; "
      "sleep 0.05; done\n",
      1);
  const auto result = p.run();
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::string id = parse_stdout(result).at("run").at("id");
  const auto shown = p.d.expctl({"show", id});
  REQUIRE(shown.exit_code == 0);
  CHECK_THAT(shown.out, Catch::Contains("\n  program\n") && Catch::Contains("\n  distributed\n"));
  for (const char* section : {"\n  model\n", "\n  data\n", "\n  optim\n", "\n  schedule\n", "\n  train\n",
                              "bucket_cap_mb", "grad_compression"}) {
    INFO(section);
    CHECK_THAT(shown.out, !Catch::Contains(section));
  }
  const auto json_shown = p.d.expctl({"show", id, "--format", "json"});
  REQUIRE(json_shown.exit_code == 0);
  const json values = json::parse(json_shown.out).at("spec").at("values");
  CHECK_FALSE(values.contains("data"));
  CHECK(values.at("program").at("command") == json::array({"./prog.sh"}));
  // A/B of the program against a built-in spec: what both specs hold is compared (the reported
  // failure: "not comparable: different datasets (fashion-mnist vs npy)", an unused default).
  const auto ab = p.d.expctl(
      {"ab", p.spec.string(), tiny_spec(), "--repeat", "2", "--set-b", "train.max_steps=10", "--format", "json"});
  INFO(ab.out << ab.err);
  CHECK(ab.exit_code != 2);
  CHECK_THAT(ab.out + ab.err, !Catch::Contains("not comparable") && !Catch::Contains("datasets"));
  const json report = json::parse(ab.out);
  for (const auto& change : report.at("spec_changes")) {
    INFO(change.dump());
    CHECK_FALSE(spec::is_trainer_setting(change.at("path").get<std::string>()));
  }
}

TEST_CASE("program: a local module no program.files pattern covers is named at the end, --strict-inputs fails") {
  RunDir d;
  d.dir.write("lib/__init__.py", "");
  d.dir.write("lib/util.py", "def f():\n    return 1\n");
  d.dir.write("train.py",
              "import expctl\nfrom lib import util\nfor s in range(1, 4):\n"
              "    expctl.log(s, loss=1.0 / s, samples=8)\n");
  const auto spec = d.dir.write("p.yaml",
                                "distributed:\n  nproc_per_node: 1\nprogram:\n"
                                "  command: [/usr/bin/python3, train.py]\n");
  const auto warned = d.expctl({"run", spec.string(), "--format", "json"});
  INFO(warned.err);
  REQUIRE(warned.exit_code == 0);
  CHECK_THAT(warned.err, Catch::Contains("warning: the program imported local module(s) that no program.files "
                                         "pattern covers, so their content is not in the spec hash: "
                                         "lib/__init__.py, lib/util.py; add them to program.files"));
  CHECK(summary_of(warned).at("program").at("unhashed_modules") == json::array({"lib/__init__.py", "lib/util.py"}));
  const auto strict = d.expctl({"run", spec.string(), "--strict-inputs", "--format", "json"});
  CHECK(strict.exit_code == 2);
  const json run = parse_stdout(strict).at("run");
  CHECK(run.at("status") == "failed");
  CHECK_THAT(run.at("root_cause").get<std::string>(),
             Catch::Contains("lib/util.py") && Catch::EndsWith("(--strict-inputs)"));
  // Covered by a pattern: nothing to name, and --strict-inputs passes.
  const auto covered = d.dir.write("q.yaml",
                                   "distributed:\n  nproc_per_node: 1\nprogram:\n"
                                   "  command: [/usr/bin/python3, train.py]\n"
                                   "  files: [train.py, \"lib/*.py\"]\n");
  const auto quiet = d.expctl({"run", covered.string(), "--strict-inputs", "--format", "json"});
  INFO(quiet.err);
  CHECK(quiet.exit_code == 0);
  CHECK_THAT(quiet.err, !Catch::Contains("no program.files pattern covers"));
  CHECK_FALSE(summary_of(quiet).at("program").contains("unhashed_modules"));
}

TEST_CASE(
    "program: program.env values the fingerprint would mask are masked in the stored spec, and the ranks get "
    "them as they are") {
  constexpr const char* k_secret = "s3cr3t-program-env-canary";
  const SmallProgram p("echo \"{\\\"step\\\": 1, \\\"loss\\\": ${#API_TOKEN}}\" >&3\n", 1, "",
                       std::string("  env: {API_TOKEN: ") + k_secret + ", STORE_URL: 'postgresql://alice:" + k_secret +
                           "@db/x', PLAIN: visible}\n");
  const auto result = p.run();
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(summary_of(result).at("final_train_loss") == static_cast<double>(std::string(k_secret).size()));
  const std::string id = parse_stdout(result).at("run").at("id");
  const auto shown = p.d.expctl({"show", id, "--format", "json"});
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.out.find(k_secret) == std::string::npos);
  const auto stored = p.d.open().spec(p.d.open().find_run(id).spec_hash);
  REQUIRE(stored.has_value());
  const json env = json::parse(stored->canonical).at("spec").at("program").at("env");
  CHECK(env.at("API_TOKEN") == "***");
  CHECK(env.at("STORE_URL") == "postgresql://alice:***@db/x");
  CHECK(env.at("PLAIN") == "visible");
  for (const auto& file : {p.d.db, fs::path(p.d.db.string() + "-wal")}) {
    CHECK(read_text(file).find(k_secret) == std::string::npos);  // a missing -wal reads as ""
  }
}

TEST_CASE(
    "program: with program.sandbox the ranks write their run folder, $TMPDIR, /dev/null and program.writable, "
    "and nothing else") {
  const std::string script =
      "w() { if (echo x >> \"$1\") 2>/dev/null; then echo 1; else echo 0; fi; }\n"
      "mkdir -p out\n"
      "echo \"{\\\"step\\\": 1, \\\"tmp\\\": $(w \"$TMPDIR/t\"), \\\"checkpoint\\\": $(w "
      "\"$EXPCTL_CHECKPOINT_DIR/c\"), "
      "\\\"writable\\\": $(w out/o), \\\"outside\\\": $(w victim.txt), \\\"null\\\": $(w /dev/null)}\" >&3\n";
  const auto point = [](const SmallProgram& p, const util::SubprocessResult& result, const std::string& name) {
    return series(p.d.open(), parse_stdout(result).at("run").at("id"), name, 0).at(1);
  };
  SECTION("sandboxed") {
    if (util::sandbox::landlock_abi() == 0) {
      test::skip("landlock", util::sandbox::describe_availability());
      return;
    }
    const SmallProgram p(script, 1, "", "  sandbox: true\n  writable: [out]\n");
    const auto victim = p.d.dir.write("victim.txt", "user data\n");
    fs::create_directories(p.d.dir / "out");
    const auto result = p.run({"--sandbox=require"});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(point(p, result, "tmp") == 1);
    CHECK(point(p, result, "checkpoint") == 1);
    CHECK(point(p, result, "writable") == 1);
    CHECK(point(p, result, "null") == 1);
    CHECK(point(p, result, "outside") == 0);
    CHECK(read_text(victim) == "user data\n");
    CHECK_FALSE(fs::exists(p.d.open().find_run(parse_stdout(result).at("run").at("id")).run_dir / "tmp"));
  }
  SECTION("off by default: the same program writes anywhere the user can") {
    const SmallProgram p(script, 1);
    p.d.dir.write("victim.txt", "user data\n");
    const auto result = p.run();
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(point(p, result, "outside") == 1);
    CHECK(result.err.find("not sandboxed") == std::string::npos);  // by the spec's choice: nothing to say
  }
  SECTION("--sandbox=require refuses a program run that is not sandboxed") {
    const SmallProgram p(script, 1);
    const auto result = p.run({"--sandbox=require"});
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Catch::Contains("program.sandbox is false"));
    CHECK_FALSE(p.d.only_run().has_value());
  }
}

TEST_CASE(
    "program: expctl.log in a child process that inherited EXPCTL_METRICS_FD but not the pipe writes nothing "
    "into the child's own descriptor 3") {
  // The rank logs step 1; its children (subprocess with and without close_fds, a multiprocessing
  // spawn child) each open a file first (their descriptor 3), then import expctl and log step 2.
  const SmallProgram p("exec /usr/bin/python3 prog.py\n", 1);
  p.d.dir.write("child.py",
                "import os, sys\n"
                "f = open(sys.argv[1], 'a')\n"
                "assert f.fileno() == 3, f.fileno()\n"
                "import expctl\n"
                "expctl.log(2, loss=99.0)\n"
                "expctl.heartbeat('child')\n"
                "f.write('child done\\n')\n");
  p.d.dir.write("prog.py",
                "import multiprocessing, os, subprocess, sys\n"
                "import expctl\n"
                "def spawned(path):\n"
                "    subprocess.run([sys.executable, 'child.py', path], check=True)\n"
                "if __name__ == '__main__':\n"
                "    expctl.log(1, loss=0.5)\n"
                "    subprocess.run([sys.executable, 'child.py', 'closed.txt'], check=True)\n"
                "    subprocess.run([sys.executable, 'child.py', 'inherited.txt'], check=True, close_fds=False)\n"
                "    ctx = multiprocessing.get_context('spawn')\n"
                "    worker = ctx.Process(target=spawned, args=('spawned.txt',))\n"
                "    worker.start(); worker.join()\n"
                "    assert worker.exitcode == 0\n");
  const auto result = p.run();
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  for (const char* name : {"closed.txt", "inherited.txt", "spawned.txt"}) {
    CHECK(read_text(p.d.dir / name) == "child done\n");
  }
  const auto loss = series(p.d.open(), parse_stdout(result).at("run").at("id"), "loss", 0);
  CHECK(loss == std::map<std::int64_t, double>{{1, 0.5}});
  CHECK_THAT(result.err, Catch::Contains("is not the metrics pipe of `expctl run`"));
}
