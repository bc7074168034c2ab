// No silent holes in a program run's record (issue 50, docs/program.md "Faults"): `expctl run`
// killed with SIGKILL (the OOM killer, a CI timeout) while its ranks train, then `expctl resume`.
// Every step a rank had reported is in the store, the killed invocation counts with its time, and
// steps missing anyway are named. Real processes; everything started here ends here.
#include <cmath>
#include <fstream>

#include <sys/stat.h>

#include "cli/run_helpers.hpp"
#include <signal.h>

#include "expctl/run/journal.hpp"
#include "expctl/run/summary.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

/// A program that resumes from its own checkpoint (a step number in EXPCTL_CHECKPOINT_DIR) and
/// logs every step before it checkpoints it, `pause` seconds apart: by the time the checkpoint
/// says step N, the line of step N left the rank long before.
std::string checkpointing_program(double pause, int steps) {
  return "import json, os, time\nimport expctl\n"
         "ckpt = os.path.join(expctl.checkpoint_dir(), f'rank{expctl.rank()}.json')\n"
         "step = 0\n"
         "if expctl.resuming() and os.path.exists(ckpt):\n"
         "    step = json.load(open(ckpt))['step']\n"
         "while step < " +
         std::to_string(steps) +
         ":\n"
         "    step += 1\n"
         "    expctl.log(step, loss=1.0 / step, samples=8)\n"
         "    time.sleep(" +
         std::to_string(pause) +
         ")\n"
         "    with open(ckpt + '.tmp', 'w') as f: json.dump({'step': step}, f)\n"
         "    os.replace(ckpt + '.tmp', ckpt)\n";
}

/// The step rank 0's checkpoint holds (0 before its first).
int checkpoint_step(const fs::path& run_dir) {
  const auto text = read_text(run_dir / "checkpoints" / "rank0.json");
  const auto at = text.find("\"step\": ");
  return at == std::string::npos ? 0 : std::atoi(text.c_str() + at + 8);
}

struct JournalProgram {
  RunDir d;
  fs::path spec;
  explicit JournalProgram(int steps) {
    d.dir.write("prog.py", checkpointing_program(0.02, steps));
    spec = d.dir.write("prog.yaml",
                       "distributed:\n  nproc_per_node: 2\nprogram:\n  command: [/usr/bin/python3, prog.py]\n"
                       "  files: [prog.py]\n");
  }
};

/// Starts `expctl run` of `p`, kills it with SIGKILL once rank 0's checkpoint reached `step`, and
/// returns the run it recorded.
store::RunRecord kill_when_checkpointed(const JournalProgram& p, int step) {
  Background expctl(p.d.argv({"run", p.spec.string(), "--format", "json"}), p.d.dir / "killed");
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = p.d.only_run()).has_value(); }));
  REQUIRE(eventually([&] { return checkpoint_step(run->run_dir) >= step; }, std::chrono::seconds(60)));
  REQUIRE(::kill(expctl.pid(), SIGKILL) == 0);
  expctl.wait();
  return *run;
}

}  // namespace

TEST_CASE(
    "program journal: expctl run killed with SIGKILL mid-training, then resume: every step is stored, both "
    "invocations count with their time") {
  JournalProgram p(300);
  const auto run = kill_when_checkpointed(p, 120);
  const int killed_at = checkpoint_step(run.run_dir);
  INFO("rank 0's checkpoint at the kill: step " << killed_at);
  // What the store held at the kill: the recorder's last batch, if any, never reached it.
  CHECK(p.d.open().run(run.id)->status == store::RunStatus::lost);
  // The journal holds what the supervisor had read (steps up to the checkpoint's at least).
  const auto history = run::read_journal(run.run_dir);
  REQUIRE(history.invocations.size() == 1);
  CHECK_FALSE(history.invocations[0].ended);
  bool journaled = false;  // rank 0's line of its checkpoint's step
  for (const auto& [rank, record] : history.invocations[0].records) {
    journaled = journaled || (rank == 0 && record.starts_with("{\"step\":" + std::to_string(killed_at) + ","));
  }
  CHECK(journaled);
  CHECK(history.unfinished_seconds() > 2.0);  // 120 steps of 20 ms at least

  const auto resumed = p.d.expctl({"resume", run.id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.err.find("invocation 1 of run " + run.id + " ended without storing its summary") != std::string::npos);
  CHECK(resumed.err.find("its program starts again with EXPCTL_RESUME=1") != std::string::npos);
  CHECK(resumed.err.find("from scratch") == std::string::npos);
  const json summary = parse_stdout(resumed).at("summary");
  CHECK(summary.at("invocations") == 2);
  CHECK(summary.at("steps") == 300);
  CHECK_FALSE(summary.contains("missing_steps"));
  CHECK(summary.at("wall_time_s").get<double>() >= history.unfinished_seconds());
  const auto db = p.d.open();
  for (const int rank : {0, 1}) {
    const auto losses = series(db, run.id, "loss", rank);  // step -> value
    INFO("rank " << rank);
    REQUIRE(losses.size() == 300);
    CHECK(losses.begin()->first == 1);
    CHECK(losses.rbegin()->first == 300);
  }
  // The run ended: the journal keeps the two invocations' markers and no records.
  const auto after = run::read_journal(run.run_dir);
  REQUIRE(after.invocations.size() == 2);
  CHECK(after.invocations[0].ended);
  CHECK(after.invocations[1].ended);
  CHECK(after.invocations[1].records.empty());
  CHECK(after.unfinished().empty());
}

TEST_CASE("program journal: steps missing anyway are named in the summary, show and list --format json") {
  JournalProgram p(300);
  const auto run = kill_when_checkpointed(p, 60);
  // The journal is lost too (a folder copied without it), and the program's checkpoints are
  // ahead of what the store holds: the steps in between can never be recorded.
  fs::remove(run.run_dir / run::k_journal_file);
  const auto db = p.d.open();
  const auto last_stored = [&](int rank) {
    const auto stored = series(db, run.id, "loss", rank);
    return stored.empty() ? std::int64_t{0} : stored.rbegin()->first;
  };
  const std::int64_t resumed_from =
      std::max<std::int64_t>({checkpoint_step(run.run_dir), last_stored(0), last_stored(1)}) + 10;
  for (const char* rank : {"rank0.json", "rank1.json"}) {
    std::ofstream(run.run_dir / "checkpoints" / rank) << "{\"step\": " << resumed_from << "}";
  }
  const std::int64_t rank0_stored = last_stored(0);
  INFO("stored through step " << rank0_stored << ", the program resumes after step " << resumed_from);
  const auto resumed = p.d.expctl({"resume", run.id, "--format", "json"});
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json summary = parse_stdout(resumed).at("summary");
  const json expected = json::array({json::array({rank0_stored + 1, resumed_from})});
  CHECK(summary.at("missing_steps") == expected);
  CHECK(summary.at("steps") == 300 - (resumed_from - rank0_stored));
  const auto shown = p.d.expctl({"show", run.id});
  CHECK(shown.out.find("missing_steps") != std::string::npos);
  const auto listed = p.d.expctl({"list", "--format", "json"});
  REQUIRE(listed.exit_code == 0);
  CHECK(listed.out.find("\"missing_steps\"") != std::string::npos);
}

TEST_CASE("summary: missing steps are judged by the run's logging stride") {
  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;
  std::vector<std::int64_t> every;
  for (std::int64_t step = 1; step <= 300; ++step) {
    if (step < 283 || step > 300 - 2) {
      every.push_back(step);
    }
  }
  CHECK(run::missing_step_ranges(every) == Ranges{{283, 298}});
  std::vector<std::int64_t> tenth;
  for (std::int64_t step = 10; step <= 500; step += 10) {
    if (step != 290 && step != 300) {
      tenth.push_back(step);
    }
  }
  CHECK(run::missing_step_ranges(tenth) == Ranges{{290, 300}});
  CHECK(run::missing_step_ranges({1, 2, 3, 4}).empty());
  CHECK(run::missing_step_ranges({}).empty());
  CHECK(run::missing_step_ranges({5}).empty());
  // Epoch ends at no regular stride: not judged.
  CHECK(run::missing_step_ranges({13, 40, 41, 99, 180, 181, 300}).empty());
}

TEST_CASE("program faults: a second Ctrl-C kills ranks that ignore the first at once, not after 60 s") {
  // The ranks trap SIGTERM (a training loop that traps it to finish an epoch, say).
  RunDir d;
  const auto file = d.dir.write("prog.sh", "#!/bin/sh\ntrap '' TERM\necho started\nwhile :; do sleep 1; done\n");
  ::chmod(file.c_str(), 0755);
  const auto spec = d.dir.write("p.yaml", "distributed:\n  nproc_per_node: 2\nprogram:\n  command: [./prog.sh]\n");
  Background expctl(d.argv({"run", spec.string()}), d.dir / "twice");
  std::optional<store::RunRecord> run;
  REQUIRE(eventually([&] { return (run = d.only_run()).has_value(); }));
  for (const char* log : {"rank-0.log", "rank-1.log"}) {
    REQUIRE(eventually([&] { return read_text(run->run_dir / "logs" / log).find("started") != std::string::npos; }));
  }
  REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
  // The ranks trap SIGTERM: the first Ctrl-C leaves them (and so expctl run) running.
  REQUIRE(expctl.wait(std::chrono::seconds(3)) == -1);
  REQUIRE(::kill(expctl.pid(), SIGINT) == 0);
  CHECK(expctl.wait(std::chrono::seconds(20)) == 130);
  CHECK(d.open().run(run->id)->status == store::RunStatus::interrupted);
}
