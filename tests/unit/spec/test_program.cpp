// The program: section (docs/program.md): placeholders, the trainer sections it excludes, the
// files whose content is hashed, and --set / hash behaviour of its mapping fields.

#include <filesystem>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/program.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;

namespace {

const std::string k_program = R"(program:
  command: [python3, train.py, --lr, "{params.lr}", --seed, "{seed}"]
  params:
    lr: 0.1
    batch_size: 64
    hidden: [32, 16]
    optimizer: adam
)";

struct Workspace {
  TempDir dir;
  Workspace() { dir.write("train.py", "print('hello')\n"); }
  Spec load(const std::string& yaml, std::vector<std::string> overrides = {}) const {
    return load_spec(dir.write("s.yaml", yaml), LoadOptions{std::move(overrides)});
  }
  std::string hash(const std::string& yaml, std::vector<std::string> overrides = {}) const {
    return load(yaml, std::move(overrides)).hash();
  }
  // Every diagnostic of a spec that must be refused, formatted as the CLI prints it.
  std::string errors(const std::string& yaml, std::vector<std::string> overrides = {}) const {
    try {
      load(yaml, std::move(overrides));
    } catch (const expctl::util::DiagnosticError& error) {
      return error.report();
    }
    FAIL("the spec was accepted");
    return "";
  }
};

}  // namespace

TEST_CASE("program: params keep their YAML types and --set replaces a declared one") {
  const Workspace ws;
  const Spec spec = ws.load(k_program, {"program.params.lr=0.2", "program.params.optimizer=\"7\"", "program.env.A=1"});
  const auto& params = spec.values()["program"]["params"];
  CHECK(params["lr"] == 0.2);
  CHECK(params["lr"].is_number_float());
  CHECK(params["batch_size"].is_number_integer());
  CHECK(params["hidden"] == nlohmann::json::array({32, 16}));
  CHECK(params["optimizer"] == "7");  // quoted: a string
  CHECK(spec.values()["program"]["env"]["A"] == "1");
  CHECK(spec.program_files() == nlohmann::json{{"train.py", spec.program_files()["train.py"]}});
}

TEST_CASE("program: params, env and the script's content enter the hash, workdir does not") {
  const Workspace ws;
  const std::string base = ws.hash(k_program);
  CHECK(ws.hash(k_program, {"program.params.lr=0.2"}) != base);
  CHECK(ws.hash(k_program, {"program.params.batch_size=64.0"}) != base);  // a float is another value
  CHECK(ws.hash(k_program, {"program.env.OMP_PROC_BIND=close"}) != base);
  CHECK(ws.hash(k_program, {"program.workdir=."}) == base);
  ws.dir.write("train.py", "print('hello, edited')\n");
  const std::string edited = ws.hash(k_program);
  CHECK(edited != base);
  ws.dir.write("train.py", "print('hello')\n");
  CHECK(ws.hash(k_program) == base);  // content, not the file's time
}

TEST_CASE("program: program.files globs are hashed by content, a spec without a program keeps its old hash") {
  const Workspace ws;
  ws.dir.write("lib/a.py", "a = 1\n");
  ws.dir.write("lib/b.py", "b = 1\n");
  const std::string with_files = k_program + "  files: [train.py, \"lib/*.py\"]\n";
  const Spec spec = ws.load(with_files);
  CHECK(spec.program_files().size() == 3);
  CHECK(spec.program_files().contains("lib/b.py"));
  const std::string before = spec.hash();
  ws.dir.write("lib/b.py", "b = 2\n");
  CHECK(ws.hash(with_files) != before);
  // Hashes of specs without a program are what they were before the section existed.
  CHECK_FALSE(nlohmann::json::parse(ws.load("seed: 3\n").canonical()).contains("program_files"));
  CHECK(ws.load("seed: 3\n").program_files().is_null());
}

TEST_CASE("program: a --set of a parameter the spec does not declare is refused, naming the declared ones") {
  const Workspace ws;
  const std::string report = ws.errors(k_program, {"program.params.learning_rate=0.1", "program.params.lrr=0.1"});
  CHECK(report.find("--set program.params.learning_rate=0.1: unknown parameter \"learning_rate\" in "
                    "\"program.params\": the spec declares batch_size, hidden, lr, optimizer; a new parameter is "
                    "declared under program.params in the spec file") != std::string::npos);
  CHECK(report.find("--set program.params.lrr=0.1: unknown parameter \"lrr\" in \"program.params\" (did you mean "
                    "\"lr\"?)") != std::string::npos);
  // The whole mapping at once: the same rule for each name.
  CHECK(ws.errors(k_program, {"program.params={lr: 0.2, momentum: 0.9}"}).find("unknown parameter \"momentum\"") !=
        std::string::npos);
  CHECK(ws.load(k_program, {"program.params={lr: 0.2}"}).values()["program"]["params"]["lr"] == 0.2);
  // A spec that declares none says so.
  const std::string bare = "program:\n  command: [python3, train.py]\n";
  CHECK(ws.errors(bare, {"program.params.lr=0.1"}).find("the spec declares no parameters") != std::string::npos);
  // A declared parameter no placeholder names is fine: the program reads it with expctl.params().
  CHECK(ws.load(bare + "  params: {lr: 0.1}\n", {"program.params.lr=0.2"}).values()["program"]["params"]["lr"] == 0.2);
}

TEST_CASE("program: trainer sections are refused with one line each, at their position") {
  const Workspace ws;
  const std::string report = ws.errors(k_program + "optim:\n  lr: 0.5\n", {"train.max_steps=5"});
  CHECK(report.find(":9:7: optim.lr configures the built-in trainer, which does not run when program.command is "
                    "set: remove it (pass your program its settings through program.params)") != std::string::npos);
  CHECK(report.find("--set train.max_steps=5: train.max_steps configures the built-in trainer") != std::string::npos);
}

TEST_CASE("program: unknown placeholders are errors at the argument that holds them") {
  const Workspace ws;
  const std::string report = ws.errors("program:\n  command:\n    - python3\n    - train.py\n    - \"{params.lrate}\"\n"
                                       "    - \"{sed}\"\n  params: {lr: 0.1}\n");
  CHECK(report.find(":5:7: program.command[2]: placeholder \"{params.lrate}\" names no parameter in program.params "
                    "(lr): declare it there, e.g. params: {lrate: ...}") != std::string::npos);
  CHECK(report.find(":6:7: program.command[3]: unknown placeholder \"{sed}\": use {params.NAME}, {seed} or {run_id} "
                    "(write {{ and }} for literal braces)") != std::string::npos);
}

TEST_CASE("program: fields without a command, and missing files, are refused") {
  const Workspace ws;
  CHECK(ws.errors("program:\n  params: {lr: 0.1}\n").find(
            "program.params is set but program.command is empty: name the program to run") != std::string::npos);
  CHECK(ws.errors(k_program + "  files: [missing.py]\n")
            .find("program.files: \"missing.py\" is not a file") != std::string::npos);
  CHECK(ws.errors(k_program + "  files: [\"src/*.py\"]\n").find("the glob \"src/*.py\" matches no file") !=
        std::string::npos);
  CHECK(ws.errors(k_program, {"program.env.1BAD=x"}).find("\"1BAD\" is not a valid environment variable name") !=
        std::string::npos);
}

TEST_CASE("program: placeholders are substituted, literal braces survive") {
  PlaceholderValues values;
  values.params = {{"lr", 0.1}, {"bs", 64}, {"name", "adam"}, {"big", 64.0}, {"list", {1, 2}}, {"on", true}};
  values.seed = 7;
  values.run_id = "r1";
  CHECK(substitute_placeholders("--lr={params.lr}", values) == "--lr=0.1");
  CHECK(substitute_placeholders("{params.bs}/{params.big}", values) == "64/64.0");
  CHECK(substitute_placeholders("{params.name}-{seed}-{run_id}", values) == "adam-7-r1");
  CHECK(substitute_placeholders("{params.list} {params.on}", values) == "[1,2] true");
  CHECK(substitute_placeholders("{{literal}}", values) == "{literal}");
  CHECK(placeholder_problem("{{x}}", values.params) == std::nullopt);
  CHECK(placeholder_problem("{params.lr", values.params).value().find("without its") != std::string::npos);
  CHECK(placeholder_problem("a}b", values.params).value().find("a lone") != std::string::npos);
}

TEST_CASE("program: the resolved spec and its hash hold no built-in trainer setting, a built-in spec keeps them") {
  const Workspace ws;
  const Spec spec = ws.load(k_program);
  for (const char* section : {"model", "data", "optim", "schedule", "train"}) {
    INFO(section);
    CHECK_FALSE(spec.values().contains(section));
    CHECK_FALSE(nlohmann::json::parse(spec.canonical())["spec"].contains(section));
  }
  for (const char* field : {"backend", "bucket_cap_mb", "grad_compression", "allreduce"}) {
    INFO(field);
    CHECK_FALSE(spec.values()["distributed"].contains(field));
  }
  CHECK_FALSE(spec.values()["metrics"].contains("log_every"));
  CHECK(spec.values()["distributed"]["nproc_per_node"] == 1);
  CHECK(spec.values()["distributed"].contains("timeout_s"));
  // A shared section's trainer-only field is refused as the trainer's sections are.
  CHECK(ws.errors(k_program + "distributed:\n  grad_compression: fp16\n")
            .find(":9:21: distributed.grad_compression configures the built-in trainer") != std::string::npos);
  const Spec builtin = ws.load("seed: 3\n");
  CHECK(builtin.values()["optim"].contains("lr"));
  CHECK(builtin.values()["distributed"].contains("bucket_cap_mb"));
  CHECK(applicable_values(builtin.values()) == builtin.values());
  // A rehash of the stored values is the same hash.
  CHECK(rehash_values(spec.values(), ws.dir / "s.yaml").hash() == spec.hash());
}

TEST_CASE("program: a program run hashed with the trainer's settings (before they were left out) is another recipe") {
  const Workspace ws;
  const Spec spec = ws.load(k_program);
  nlohmann::json old = nlohmann::json::parse(spec.canonical());
  old["spec"]["optim"] = {{"lr", 0.01}};
  const auto changes = canonical_changes(old.dump(), spec);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].kind == HashChange::Kind::recipe);
  CHECK(changes[0].text.find("hashed with the built-in trainer's settings") != std::string::npos);
}

TEST_CASE("program: a command whose script is not there is refused at its position") {
  const Workspace ws;
  CHECK(ws.errors("program:\n  command:\n    - python3\n    - trian.py\n")
            .find(":4:7: program.command[1]: \"trian.py\" is not a file (looked for ") != std::string::npos);
  CHECK(ws.errors("program:\n  command: [./run.sh, --fast]\n")
            .find(":2:13: program.command[0]: \"./run.sh\" is not a "
                  "file") != std::string::npos);
  // Relative to program.workdir when it is set.
  ws.dir.write("sub/train.py", "print('sub')\n");
  CHECK_NOTHROW(ws.load("program:\n  command: [python3, train.py]\n  workdir: sub\n"));
  CHECK(ws.errors("program:\n  command: [python3, other.py]\n  workdir: sub\n").find("sub/other.py") !=
        std::string::npos);
  // Options, placeholders, PATH names and absolute paths are not files to look for here.
  CHECK_NOTHROW(ws.load("program:\n  command: [python3, -m, pkg.train, --out, \"{run_id}.log\", /bin/true]\n"));
}

TEST_CASE("program: program.inputs files and folders are hashed by content") {
  const Workspace ws;
  ws.dir.write("data/train/a.bin", "aaaa");
  ws.dir.write("data/train/sub/b.bin", "bbbb");
  ws.dir.write("labels.csv", "x,y\n");
  const std::string with_inputs = k_program + "  inputs: [data/train, labels.csv]\n";
  const Spec spec = ws.load(with_inputs);
  const auto digests = spec.input_digests();
  CHECK(digests.contains("program.inputs/data/train"));
  CHECK(digests.contains("program.inputs/labels.csv"));
  CHECK(nlohmann::json::parse(spec.canonical())["inputs"] == digests);
  const std::string base = spec.hash();
  CHECK(base != ws.hash(k_program));
  ws.dir.write("data/train/sub/b.bin", "bbbB");  // a file under the folder edited
  const std::string edited = ws.hash(with_inputs);
  CHECK(edited != base);
  ws.dir.write("data/train/sub/b.bin", "bbbb");
  CHECK(ws.hash(with_inputs) == base);
  ws.dir.write("data/train/c.bin", "");  // a file added
  CHECK(ws.hash(with_inputs) != base);
  ws.dir.write("labels.csv", "x,z\n");
  CHECK(ws.hash(with_inputs) != base);
  CHECK(ws.errors(k_program + "  inputs: [data/missing]\n")
            .find("program.inputs: \"data/missing\" is neither a file nor a folder") != std::string::npos);
}
