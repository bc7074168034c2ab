// A nightly entry keeps its identity across changes of its spec and files (docs/nightly.md,
// "Entries have an identity"), through the real binary: a team's program under `expctl nightly`
// whose script gets 2.3x slower is judged against the entry's earlier nights and fails the night,
// the report naming the script that changed. Real program runs, made by the nightly itself.
#include "cli/run_helpers.hpp"

using namespace expctl;
using namespace expctl::test::cli;

namespace {

/// A program that logs 40 steps of `pause` seconds each.
std::string paced_program(double pause) {
  return "import time\nimport expctl\nfor step in range(1, 41):\n    time.sleep(" + std::to_string(pause) +
         ")\n    expctl.log(step, loss=1.0 / step, samples=16)\n";
}

struct ProgramSuite {
  RunDir d;
  fs::path script = d.dir.write("train.py", paced_program(0.02));
  fs::path spec = d.dir.write("prog.yaml",
                              "name: prog\ndistributed:\n  nproc_per_node: 1\n"
                              "program:\n  command: [/usr/bin/python3, train.py]\n  files: [train.py]\n");
  fs::path suite = d.dir.write("suite.yaml",
                               "suite: team\nspecs:\n  - spec: prog.yaml\n    repeat: 2\n"
                               "    confirm_rounds: 1\n    baseline_nights: 5\n"
                               "    thresholds: {samples_per_sec: -20%}\n");
  util::SubprocessResult night(const std::string& date) const {
    return d.expctl({"nightly", suite.string(), "--date", date, "--junit", (d.dir / (date + ".xml")).string(),
                     "--summary", (d.dir / (date + ".md")).string()});
  }
};

}  // namespace

TEST_CASE(
    "nightly entries: a program entry whose script got 2.3x slower fails the night against its earlier "
    "nights, naming the script") {
  ProgramSuite s;
  for (const char* date : {"2026-12-01", "2026-12-02"}) {
    const auto night = s.night(date);
    INFO(night.out << night.err);
    REQUIRE(night.exit_code == 0);
  }
  s.d.dir.write("train.py", paced_program(0.046));
  const auto night = s.night("2026-12-03");
  INFO(night.out << night.err);
  CHECK(night.exit_code == 3);
  CHECK_THAT(night.out,
             Catch::Contains("prog: fail: regression in samples_per_sec") && Catch::Contains("confirmed by 1 reruns"));
  CHECK_THAT(night.out, Catch::Contains("changed since the baseline: " + s.script.string() + " changed"));
  const auto markdown = read_text(s.d.dir / "2026-12-03.md");
  CHECK_THAT(markdown, Catch::Contains("Changed since the baseline:") && Catch::Contains("train.py"));
  // The runs of every night carry the entry, whatever the script's digest.
  const auto runs = s.d.open().list_runs({.tag = "nightly-entry:team/prog.yaml"});
  CHECK(runs.size() == 2 + 2 + 2 + 1);
}
