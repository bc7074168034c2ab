#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/env/diff.hpp"

using namespace expctl::env;

namespace {

Fingerprint load(const std::string& name) {
  std::ifstream in(expctl::test::source_dir() / "tests/data/env" / name);
  REQUIRE(in.good());
  return Fingerprint::from_json(nlohmann::json::parse(in), name);
}

}  // namespace

TEST_CASE("env diff: two hand-made fingerprints differ field by field, grouped") {
  const std::vector<DiffRow> rows = diff_fingerprints(load("node_a.json"), load("node_b.json"));
  std::vector<std::string> lines;
  for (const DiffRow& row : rows) {
    lines.push_back(row.field + ": " + row.left + " -> " + row.right + (row.hashed ? "" : " (not hashed)"));
  }
  CHECK(lines == std::vector<std::string>{
                     "host.hostname: node3 -> node4 (not hashed)",
                     "host.uptime_s: 86400 -> 300 (not hashed)",
                     "gpu.driver_version: 535.104.05 -> 550.54.15",
                     "gpu.cuda_driver: 12.2 -> 12.4",
                     "code.untracked[notes.txt]: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa -> "
                     "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb (not hashed)",
                     "env.vars.NCCL_DEBUG: unset -> INFO",
                     "env.vars.OMP_NUM_THREADS: 8 -> 16",
                     "env.launch_vars.SLURM_JOB_ID: 1001 -> 1002 (not hashed)",
                 });
  CHECK(any_hashed(rows));
  CHECK(rows.front().group == "host");
}

TEST_CASE("env diff: differences only in unhashed fields keep the hashes equal") {
  const Fingerprint a = load("node_a.json");
  const Fingerprint c = load("node_c.json");
  const std::vector<DiffRow> rows = diff_fingerprints(a, c);
  CHECK(rows.size() == 2);
  CHECK_FALSE(any_hashed(rows));
  CHECK(a.hash() == c.hash());
}

TEST_CASE("env diff: a fingerprint equals itself") {
  CHECK(diff_fingerprints(load("node_a.json"), load("node_a.json")).empty());
}

TEST_CASE("env diff: the rendered table groups rows under their group") {
  Fingerprint a = load("node_a.json");
  Fingerprint b = load("node_a.json");
  b.set("gpu.driver_version", "550.54.15");
  b.set("gpu.cuda_driver", "12.4");
  b.set("host.hostname", "node9");
  CHECK(render_diff(diff_fingerprints(a, b), "A", "B") ==
        "group  field           A           B          hashed\n"
        "-----  --------------  ----------  ---------  ------\n"
        "host   hostname        node3       node9      no\n"
        "gpu    driver_version  535.104.05  550.54.15  yes\n"
        "       cuda_driver     12.2        12.4       yes\n");
}

TEST_CASE("env diff: fields unknown to this expctl are still compared") {
  Fingerprint a = load("node_a.json");
  nlohmann::json document = a.to_json();
  document["fields"]["gpu"]["nvlink"] = "4";
  const std::vector<DiffRow> rows = diff_fingerprints(a, Fingerprint::from_json(document, "newer.json"));
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].field == "gpu.nvlink");
  CHECK(rows[0].left == "unset");
  CHECK_FALSE(rows[0].hashed);
}

TEST_CASE("env diff against a run: a fingerprint without a spec takes the run's determinism settings, and says so") {
  Fingerprint taken = load("node_a.json");
  Fingerprint run = load("node_a.json");
  taken.set("determinism.seed", "none");
  taken.set("determinism.deterministic_algorithms", false);
  run.set("determinism.seed", "7");
  run.set("determinism.deterministic_algorithms", true);
  CHECK(adopt_run_determinism(taken, run, "20261201-101530") ==
        "note: the fingerprint without a spec is compared with the determinism settings run 20261201-101530 set from "
        "its spec (determinism.deterministic_algorithms)\n");
  CHECK(diff_fingerprints(taken, run).size() == 1);                     // the seed alone, which is not hashed
  CHECK(adopt_run_determinism(taken, run, "20261201-101530").empty());  // nothing left to adopt
}

TEST_CASE("env diff against a run: different code in another folder names the run's folder") {
  Fingerprint taken = load("node_a.json");
  Fingerprint run = load("node_a.json");
  taken.set("code.directory", "/home/me");
  run.set("code.directory", "/home/me/experiments");
  CHECK(code_folder_hint(taken, run).empty());  // the same code: no hint
  run.set("code.dirty", true);
  CHECK(code_folder_hint(taken, run) ==
        "note: the code state was taken in /home/me, the run's in its spec's folder /home/me/experiments: compare a "
        "fingerprint taken there (expctl env --dir /home/me/experiments --format json)\n");
}
