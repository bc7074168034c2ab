// The sandbox (docs/models.md#the-sandbox), end to end with the real binary: a hostile
// TorchScript model, scripted here by Debian's python3-torch, whose forward maps a file outside
// the run folder with torch.from_file(shared=True) and writes into it.
#include <fstream>

#include "cli/run_helpers.hpp"
#include "support/byo_fixtures.hpp"

#include "expctl/util/sandbox.hpp"

using namespace expctl;
using namespace expctl::test::cli;
using test::run_expctl;

namespace {

constexpr const char* k_user_content = "the user's file: never overwritten\n";

/// Scripts a module whose forward opens `target` read-write and shared (aten::from_file) and
/// writes "PWNED!!\n" over its first 8 bytes; the result feeds the output, so TorchScript keeps it.
/// `in_training`: only for batches of more than 2 samples, so that the model check before a run
/// (two samples) passes and the rank itself meets the sandbox.
fs::path hostile_model(const test::TempDir& dir, const fs::path& target, bool in_training) {
  const fs::path model = dir / (in_training ? "hostile-in-training.pt" : "hostile.pt");
  // A file, not `python -c`: torch.jit.script reads the class's source.
  const fs::path script =
      dir.write("make_hostile.py",
                "import sys, torch\n"
                "class Hostile(torch.nn.Module):\n"
                "    def __init__(self, target: str, smallest: int):\n"
                "        super().__init__()\n"
                "        self.target = target\n"
                "        self.smallest = smallest\n"
                "        self.fc = torch.nn.Linear(784, 10)\n"
                "    def forward(self, x):\n"
                "        extra = torch.zeros(1)\n"
                "        if x.size(0) >= self.smallest:\n"
                "            mapped = torch.from_file(self.target, True, 8, dtype=torch.uint8)\n"
                "            mapped.copy_(torch.tensor([80, 87, 78, 69, 68, 33, 33, 10], dtype=torch.uint8))\n"
                "            extra = mapped.sum().to(x.dtype) * 0.0\n"
                "        return self.fc(x.flatten(1)) + extra\n"
                "torch.jit.script(Hostile(sys.argv[2], int(sys.argv[3]))).save(sys.argv[1])\n");
  util::SubprocessOptions options;
  options.env["OMP_NUM_THREADS"] = "1";
  const auto made = util::run_capture(
      {"/usr/bin/python3", script.string(), model.string(), target.string(), in_training ? "3" : "1"}, options);
  REQUIRE(made.has_value());
  INFO(made->out << made->err);
  REQUIRE(made->exit_code == 0);
  return model;
}

struct Hostile {
  explicit Hostile(bool in_training = false)
      : spec(test::byo_spec(d.dir, hostile_model(d.dir, victim, in_training).string(), "fmnist",
                            "{max_steps: 2, eval_every: 0}", "hostile.yaml")) {}
  RunDir d;
  fs::path victim = d.dir.write("home/.bashrc", k_user_content);
  fs::path spec;
};

bool have_landlock() {
  if (util::sandbox::landlock_abi() > 0) {
    return true;
  }
  test::skip("landlock", util::sandbox::describe_availability());
  return false;
}

}  // namespace

TEST_CASE("sandbox: a hostile model overwrites the user's file when the sandbox is off (what the sandbox is for)") {
  Hostile h;
  const auto checked = h.d.expctl({"validate", "--sandbox", "off", h.spec.string()});
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 0);
  CHECK(read_text(h.victim).starts_with("PWNED!!\n"));
}

TEST_CASE(
    "sandbox: expctl validate runs the model check sandboxed: the user's file is untouched and the check "
    "fails naming the sandbox") {
  if (!have_landlock()) {
    return;
  }
  Hostile h;
  const auto checked = h.d.expctl({"validate", h.spec.string()});
  INFO(checked.out << checked.err);
  CHECK(checked.exit_code == 2);
  CHECK(read_text(h.victim) == k_user_content);
  CHECK_THAT(checked.err, Catch::Contains("the model tried to write outside its temporary folder; expctl's sandbox "
                                          "(Landlock) refused it"));
  CHECK_THAT(checked.err, Catch::Contains(h.victim.string()));
  // The same under --sandbox=require, and the JSON document says it too.
  const auto json_checked = h.d.expctl({"validate", "--sandbox=require", "--format", "json", h.spec.string()});
  CHECK(json_checked.exit_code == 2);
  CHECK_THAT(json_checked.out, Catch::Contains("expctl's sandbox (Landlock) refused it"));
  CHECK(read_text(h.victim) == k_user_content);
}

TEST_CASE("sandbox: expctl run checks the model sandboxed before recording anything") {
  if (!have_landlock()) {
    return;
  }
  Hostile h;
  const auto refused = h.d.expctl({"run", h.spec.string()});
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("expctl's sandbox (Landlock) refused it"));
  CHECK(read_text(h.victim) == k_user_content);
  CHECK_FALSE(h.d.only_run().has_value());
}

TEST_CASE(
    "sandbox: a rank loads and trains the model sandboxed: a model that writes only in training fails the "
    "run naming the sandbox, and the user's file is untouched") {
  Hostile h(/*in_training=*/true);
  SECTION("sandbox off: the rank overwrites the file (what the sandbox is for)") {
    const auto result = h.d.expctl({"run", "--sandbox=off", h.spec.string(), "--format", "json"});
    INFO(result.out << result.err);
    CHECK(result.exit_code == 0);
    CHECK(read_text(h.victim).starts_with("PWNED!!\n"));
    CHECK(parse_stdout(result).at("summary").at("sandbox") == "off");
  }
  SECTION("sandboxed") {
    if (!have_landlock()) {
      return;
    }
    const auto result = h.d.expctl({"run", h.spec.string(), "--format", "json"});
    INFO(result.out << result.err);
    CHECK(result.exit_code == 1);
    CHECK(read_text(h.victim) == k_user_content);
    const auto run = h.d.only_run();
    REQUIRE(run.has_value());
    CHECK(run->status == store::RunStatus::failed);
    CHECK_THAT(result.err, Catch::Contains("the model tried to write outside the run's folder; expctl's sandbox "
                                           "(Landlock) refused it"));
    CHECK_FALSE(fs::exists(run->run_dir / "tmp"));  // the ranks' temporary folders are gone
    CHECK(parse_stdout(result).at("summary").at("sandbox") ==
          fmt::format("landlock ABI {}", util::sandbox::landlock_abi()));
  }
}

TEST_CASE("sandbox: without Landlock one line says the run is not sandboxed, and --sandbox=require refuses it") {
  Hostile h;
  const std::map<std::string, std::optional<std::string>> no_landlock = {{"EXPCTL_LANDLOCK_ABI_MAX", "0"}};
  const fs::path plain = h.d.dir.write("plain.yaml",
                                       "name: plain\nmodel: {arch: mlp}\ndata: {dataset: synthetic}\n"
                                       "train: {max_steps: 1}\ndistributed: {nproc_per_node: 1}\n");
  const auto refused =
      run_expctl({"--db", h.d.db.string(), "run", "--sandbox", "require", plain.string()}, no_landlock);
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::StartsWith("expctl: error: --sandbox=require: "));
  CHECK_THAT(refused.err, Catch::Contains("Landlock"));
  CHECK_FALSE(h.d.only_run().has_value());

  const auto unsandboxed =
      run_expctl({"--db", h.d.db.string(), "run", plain.string(), "--format", "json"}, no_landlock);
  INFO(unsandboxed.out << unsandboxed.err);
  CHECK(unsandboxed.exit_code == 0);
  CHECK_THAT(parse_stdout(unsandboxed).at("summary").at("sandbox").get<std::string>(),
             Catch::StartsWith("not sandboxed: Landlock is turned off by EXPCTL_LANDLOCK_ABI_MAX=0"));
  CHECK_THAT(unsandboxed.err, Catch::Contains("expctl: warning: the run is not sandboxed: "));
  std::size_t lines = 0;
  for (std::size_t at = unsandboxed.err.find("not sandboxed"); at != std::string::npos;
       at = unsandboxed.err.find("not sandboxed", at + 1)) {
    ++lines;
  }
  CHECK(lines == 1);

  const auto validate_refused = run_expctl({"validate", "--sandbox=require", h.spec.string()}, no_landlock);
  CHECK(validate_refused.exit_code == 2);
  CHECK_THAT(validate_refused.err, Catch::Contains("--sandbox=require: "));
  CHECK(read_text(h.victim) == k_user_content);  // refused before the model ran
}

TEST_CASE("sandbox: a built-in run under an external launcher is not sandboxed, and --sandbox=require refuses it") {
  RunDir d;
  const fs::path plain = d.dir.write("plain.yaml",
                                     "name: plain\nmodel: {arch: mlp}\ndata: {dataset: synthetic}\n"
                                     "train: {max_steps: 1}\n");
  const std::map<std::string, std::optional<std::string>> torchrun = {
      {"RANK", "0"},       {"WORLD_SIZE", "1"},          {"LOCAL_RANK", "0"},  {"LOCAL_WORLD_SIZE", "1"},
      {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}, {"EXPCTL_CONTROL_FD", std::nullopt}};
  const auto refused = run_expctl({"--db", d.db.string(), "run", "--sandbox=require", plain.string()}, torchrun);
  INFO(refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--sandbox=require: under an external launcher each rank is an `expctl run` "
                                          "that trains in its own process"));
  CHECK_FALSE(d.only_run().has_value());
}
