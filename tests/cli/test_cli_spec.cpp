// `expctl validate` and `expctl hash` through the real binary.

#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using expctl::test::run_expctl;
using expctl::test::source_dir;
using expctl::test::TempDir;

namespace {

std::string in_source(const std::string& relative) {
  return (source_dir() / relative).string();
}

std::string quickstart() {
  return in_source("experiments/quickstart.yaml");
}

}  // namespace

TEST_CASE("cli spec: validate prints ok with the hash - exit 0") {
  const auto result = run_expctl({"validate", quickstart()});
  CHECK(result.exit_code == 0);
  const auto hash = run_expctl({"hash", quickstart()});
  REQUIRE(hash.exit_code == 0);
  REQUIRE(hash.out.size() == 65);
  CHECK(result.out == "ok: " + quickstart() + " (spec " + hash.out.substr(0, 64) + ")\n");
  CHECK(result.err.empty());
}

TEST_CASE("cli spec: every shipped experiment is valid") {
  const auto result = run_expctl({"validate", in_source("experiments/quickstart.yaml"),
                                  in_source("experiments/cnn.yaml"), in_source("experiments/amp_accum.yaml")});
  CHECK(result.exit_code == 0);
  CHECK(std::count(result.out.begin(), result.out.end(), '\n') == 3);
}

TEST_CASE("cli spec: the shipped experiments say what the issue asks of them") {
  const auto json_of = [](const std::string& file) {
    const auto result = run_expctl({"validate", "--format", "json", in_source(file)});
    REQUIRE(result.exit_code == 0);
    return nlohmann::json::parse(result.out)["specs"][0]["values"];
  };
  const auto quick = json_of("experiments/quickstart.yaml");
  CHECK(quick["data"]["dataset"] == "fashion-mnist");
  CHECK(quick["model"]["arch"] == "mlp");
  CHECK(quick["distributed"]["nproc_per_node"] == 2);
  CHECK(quick["env"] == "envs/debian12-cpu.toml");
  CHECK(quick["train"]["max_steps"].get<int>() >= 100);
  CHECK(json_of("experiments/cnn.yaml")["model"]["arch"] == "cnn");
  const auto amp = json_of("experiments/amp_accum.yaml");
  CHECK(amp["train"]["amp"]["enabled"] == true);
  CHECK(amp["train"]["amp"]["dtype"] == "bf16");
  CHECK(amp["train"]["grad_accum_steps"].get<int>() > 1);
}

TEST_CASE("cli spec: an invalid spec prints every problem and exits 2 - other specs are still checked") {
  const TempDir dir;
  const auto bad = dir.write("bad.yaml", "optim:\n  lerning_rate: 3e-4\ntrain:\n  grad_accum_steps: 0\n");
  const auto result = run_expctl({"validate", bad.string(), quickstart()});
  CHECK(result.exit_code == 2);
  CHECK(result.err == "expctl: error: " + bad.string() +
                          ":2:3: unknown key \"lerning_rate\" in \"optim\" (did you mean \"lr\"?)\n"
                          "    2 |   lerning_rate: 3e-4\n"
                          "      |   ^\n"
                          "expctl: error: " +
                          bad.string() +
                          ":4:21: train.grad_accum_steps must be between 1 and 1024, found 0\n"
                          "    4 |   grad_accum_steps: 0\n"
                          "      |                     ^\n"
                          "expctl: 2 errors in " +
                          bad.string() + "\n");
  CHECK_THAT(result.out, Catch::StartsWith("ok: " + quickstart()));
}

TEST_CASE("cli spec: validate --format json has a stable shape") {
  const TempDir dir;
  const auto bad = dir.write("bad.yaml", "seed: x\n");
  const auto result = run_expctl({"validate", "--format", "json", quickstart(), bad.string()});
  CHECK(result.exit_code == 2);
  const auto document = nlohmann::json::parse(result.out);
  CHECK(document["format_version"] == 1);
  CHECK(document["kind"] == "validate");
  CHECK(document["valid"] == false);
  REQUIRE(document["specs"].size() == 2);
  const auto& ok = document["specs"][0];
  CHECK(ok["valid"] == true);
  CHECK(ok["hash"].get<std::string>().size() == 64);
  CHECK(ok["values"]["optim"]["lr"] == 0.05);
  CHECK(ok["errors"].empty());
  const auto& invalid = document["specs"][1];
  CHECK(invalid["valid"] == false);
  CHECK(invalid["hash"].is_null());
  CHECK(invalid["errors"] ==
        nlohmann::json::parse(R"([{"file": ")" + bad.string() +
                              R"(", "line": 1, "column": 7, "message": "seed must be an integer, found \"x\""}])"));
}

TEST_CASE("cli spec: --set overrides on validate and hash - a bad one names the override") {
  const auto base = run_expctl({"hash", quickstart()});
  const auto changed = run_expctl({"hash", quickstart(), "--set", "seed=43"});
  const auto same = run_expctl({"hash", "--set", "seed=42", quickstart(), "--set", "optim.lr=5e-2"});
  REQUIRE(base.exit_code == 0);
  CHECK(changed.exit_code == 0);
  CHECK(changed.out != base.out);
  CHECK(same.out == base.out);
  const auto bad = run_expctl({"validate", quickstart(), "--set", "optim.lr=abc"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "expctl: error: --set optim.lr=abc: optim.lr must be a float, found \"abc\"\n");
}

TEST_CASE("cli spec: hash --canonical prints the hashed bytes - json carries both") {
  const auto canonical = run_expctl({"hash", "--canonical", quickstart()});
  REQUIRE(canonical.exit_code == 0);
  CHECK_THAT(canonical.out, Catch::StartsWith("{\"env_profile\":{"));
  CHECK_THAT(canonical.out, Catch::Contains("\"expctl_spec_version\":2"));
  const auto json = run_expctl({"hash", "--format", "json", quickstart()});
  REQUIRE(json.exit_code == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document["kind"] == "hash");
  CHECK(document["canonical"].get<std::string>() + "\n" == canonical.out);
  CHECK(document["hash"].get<std::string>().size() == 64);
}

TEST_CASE("cli spec: hash of an invalid or missing spec exits 2 with the diagnostics") {
  const TempDir dir;
  const auto empty = dir.write("empty.yaml", "");
  const auto result = run_expctl({"hash", empty.string()});
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("expctl: error: " + empty.string() + ": the spec is empty"));
  CHECK(run_expctl({"hash"}).exit_code == 2);
  CHECK(run_expctl({"validate"}).exit_code == 2);
}

TEST_CASE("cli spec: help texts explain the commands with an example and the exit codes") {
  for (const char* command : {"validate", "hash"}) {
    const auto help = run_expctl({command, "--help"});
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Contains("Example: expctl "));
    CHECK_THAT(help.out, Catch::Contains("--set"));
    CHECK_THAT(help.out, Catch::Contains("Exit codes:"));
    CHECK_THAT(help.out, !Catch::Contains("--print-field-table"));
  }
}

TEST_CASE("cli spec: the hidden field-table printer matches docs/spec.md") {
  const auto result = run_expctl({"validate", "--print-field-table"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("<!-- BEGIN FIELD TABLE"));
  CHECK_THAT(result.out, Catch::Contains("| `optim.lr` | float |"));
}

// Issue 41, observation 9: a script given as the spec got a YAML error about its first line, and a
// Hydra-style positional override got "no such file" or "not expected".
TEST_CASE("spec: a script is told what expctl runs, and a positional key=value is pointed at --set") {
  TempDir dir;
  const auto script = dir / "train.py";
  std::ofstream(script) << "import torch\nclass Net(torch.nn.Module):\n    pass\n";
  const auto as_spec = run_expctl({"validate", script.string()});
  CHECK(as_spec.exit_code == 2);
  CHECK_THAT(as_spec.err, Catch::Contains("train.py: expctl runs experiment specs (YAML); to run a script, use a "
                                          "`program:` spec (docs/program.md; experiments/python-ddp/ has one)"));
  const auto validate = run_expctl({"validate", quickstart(), "optim.lr=0.1"});
  CHECK(validate.exit_code == 2);
  CHECK_THAT(validate.err,
             Catch::Contains("optim.lr=0.1: no such file; it looks like an override: did you mean `--set optim.lr=0.1`?"));
  const auto run = run_expctl({"run", quickstart(), "optim.lr=0.1"});
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Catch::Contains("not expected: optim.lr=0.1 (did you mean `--set optim.lr=0.1`?)"));
}

// Issue 41, observation 2: data.root was not hashed and the dataset's files were not digested, so a
// data file changed in place kept the spec hash (a sweep skipped the point as done; compare called
// the new run a reproducibility regression of the old).
TEST_CASE("cli spec: a built-in dataset's file changed in place changes the spec hash, another folder with the same "
          "bytes does not") {
  TempDir dir;
  const auto fill = [&](const std::string& folder, const std::string& images) {
    for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                             "t10k-labels-idx1-ubyte.gz"}) {
      dir.write(folder + "/" + name, std::string(name).starts_with("train-images") ? images : std::string(name));
    }
    return (dir / folder).string();
  };
  const auto hash = [&](const std::string& root) {
    const auto result = run_expctl({"hash", quickstart(), "--set", "data.root=" + root});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    return result.out;
  };
  const std::string a = fill("a", "images v1");
  const std::string before = hash(a);
  CHECK(hash(fill("b", "images v1")) == before);  // a copy elsewhere: the same experiment
  fill("a", "images v2");                          // the same path, other bytes
  CHECK(hash(a) != before);
}

TEST_CASE("cli spec: validate checks a nightly suite as a suite - each entry's spec with its set") {
  const TempDir dir;
  dir.write("train.sh", "exit 0\n");
  dir.write("prog.yaml", "program:\n  command: [/bin/sh, train.sh]\n  params: {lr: 0.1, epochs: 2}\n");
  const auto good =
      dir.write("suite.yaml", "suite: s\nspecs:\n  - spec: prog.yaml\n    set: [program.params.lr=0.2]\n");
  const auto result = run_expctl({"validate", good.string()});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  const auto hash = run_expctl({"hash", (dir / "prog.yaml").string(), "--set", "program.params.lr=0.2"});
  REQUIRE(hash.exit_code == 0);
  CHECK(result.out == "ok: " + good.string() + " (suite s, 1 entry)\n  specs[0]    " + hash.out.substr(0, 64) + "  " +
                          (dir / "prog.yaml").string() + "\n");
  const auto json = run_expctl({"validate", "--format", "json", good.string()});
  REQUIRE(json.exit_code == 0);
  const auto entry = nlohmann::json::parse(json.out)["specs"][0];
  CHECK(entry["kind"] == "suite");
  CHECK(entry["entries"][0]["hash"] == hash.out.substr(0, 64));
  // The entry's set: names a parameter the spec does not declare: exit 2 naming the entry.
  const auto bad = dir.write("bad.yaml", "suite: s\nspecs:\n  - spec: prog.yaml\n    set: [program.params.lrr=0.2]\n");
  const auto refused = run_expctl({"validate", bad.string()});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err == "expctl: error: " + bad.string() +
                           ": specs[0].set: program.params.lrr=0.2: unknown parameter \"lrr\" in \"program.params\" "
                           "(did you mean \"lr\"?): the spec declares epochs, lr; a new parameter is declared under "
                           "program.params in the spec file\n");
  // A suite's own mistakes are still named as before.
  const auto typo = dir.write("typo.yaml", "suite: s\nspecs:\n  - spec: prog.yaml\n    sett: []\n");
  const auto typo_result = run_expctl({"validate", typo.string()});
  CHECK(typo_result.exit_code == 2);
  CHECK_THAT(typo_result.err, Catch::Contains("unknown key 'sett'"));
  CHECK_THAT(typo_result.err, !Catch::Contains("unknown top-level key"));
}

TEST_CASE("cli spec: validate checks a sweep file as a sweep, and its axes against the declared params") {
  const TempDir dir;
  dir.write("train.sh", "exit 0\n");
  dir.write("prog.yaml", "program:\n  command: [/bin/sh, train.sh]\n  params: {lr: 0.1}\n");
  const auto sweep = dir.write("sweep.yaml", "base: prog.yaml\ngrid:\n  program.params.lr: [0.01, 0.1]\n");
  const auto result = run_expctl({"validate", sweep.string()});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("ok: " + sweep.string() + " (sweep ") && Catch::Contains(", 2 points)"));
  const auto bad = dir.write("bad.yaml", "base: prog.yaml\ngrid:\n  program.params.learning_rate: [0.01, 0.1]\n");
  const auto refused = run_expctl({"validate", bad.string()});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains(bad.string() + ":3:") &&
                              Catch::Contains("unknown parameter \"learning_rate\" in \"program.params\": the spec "
                                              "declares lr"));
}
