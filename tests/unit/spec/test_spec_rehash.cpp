// A run's resolved values hashed again (spec::rehash_values, what `expctl resume` checks): the
// same hash as the spec it was resolved from, and every hashed file or field that changed since,
// named (spec::canonical_changes). Issue 49.
#include <algorithm>
#include <filesystem>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> texts(const std::vector<HashChange>& changes) {
  std::vector<std::string> out;
  for (const auto& change : changes) {
    out.push_back(change.text);
  }
  return out;
}

}  // namespace

TEST_CASE("rehash: a program spec's values hash as the spec did, until its script or a listed file changes") {
  TempDir dir;
  dir.write("train.py", "print('v1')\n");
  dir.write("lib/util.py", "x = 1\n");
  const auto file = dir.write("p.yaml",
                              "distributed: {nproc_per_node: 2}\nprogram:\n  command: [python3, train.py, "
                              "\"{params.lr}\"]\n  params: {lr: 0.1, layers: [2, 3]}\n  files: [train.py, "
                              "\"lib/*.py\"]\n");
  const Spec spec = load_spec(file, {{"program.params.lr=0.2"}});
  const nlohmann::json values = nlohmann::json::parse(spec.values().dump());  // as resolved.json reads back
  CHECK(rehash_values(values, fs::absolute(file)).hash() == spec.hash());

  dir.write("train.py", "print('v2')\n");
  const Spec edited = rehash_values(values, fs::absolute(file));
  CHECK(edited.hash() != spec.hash());
  CHECK(texts(canonical_changes(spec.canonical(), edited)) ==
        std::vector<std::string>{(fs::absolute(dir / "train.py")).lexically_normal().string() + " changed"});
  dir.write("train.py", "print('v1')\n");
  CHECK(rehash_values(values, fs::absolute(file)).hash() == spec.hash());

  fs::remove(dir / "lib" / "util.py");  // the glob matches nothing now: refused, naming it
  CHECK_THROWS_AS(rehash_values(values, fs::absolute(file)), expctl::util::DiagnosticError);
  dir.write("lib/util.py", "x = 1\n");
  dir.write("lib/more.py", "y = 1\n");
  const auto added = canonical_changes(spec.canonical(), rehash_values(values, fs::absolute(file)));
  REQUIRE(added.size() == 1);
  CHECK(added[0].kind == HashChange::Kind::file);
  CHECK_THAT(added[0].text, Catch::EndsWith("lib/more.py is new (not there when the run started)"));
}

TEST_CASE("rehash: a built-in spec's model and arrays are read again, and a field edited in the values is named") {
  TempDir dir;
  dir.write("model.pt", "model v1");
  dir.write("x.npy", "inputs");
  dir.write("y.npy", "targets");
  dir.write("ex.npy", "eval inputs");
  dir.write("ey.npy", "eval targets");
  const auto file = dir.write("b.yaml",
                              "data: {dataset: npy, train_inputs: x.npy, train_targets: y.npy, "
                              "eval_inputs: ex.npy, eval_targets: ey.npy}\n"
                              "model: {arch: torchscript, file: model.pt}\noptim: {lr: 0.05}\n");
  const Spec spec = load_spec(file);
  nlohmann::json values = nlohmann::json::parse(spec.values().dump());
  CHECK(rehash_values(values, fs::absolute(file)).hash() == spec.hash());
  CHECK(rehash_values(values, fs::absolute(file)).input_paths() == spec.input_paths());

  dir.write("y.npy", "other targets");
  auto changes = canonical_changes(spec.canonical(), rehash_values(values, fs::absolute(file)));
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].text == "data.train_targets " + (dir / "y.npy").string() + " changed");
  dir.write("y.npy", "targets");

  values["optim"]["lr"] = 0.5;  // a resolved.json edited by hand
  changes = canonical_changes(spec.canonical(), rehash_values(values, fs::absolute(file)));
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].kind == HashChange::Kind::field);
  CHECK(changes[0].text == "optim.lr is 0.5, it was 0.05");

  values["optim"]["lr"] = "fast";  // of another type: refused, never hashed
  CHECK_THROWS_AS(rehash_values(values, fs::absolute(file)), expctl::util::DiagnosticError);
  values["optim"]["lr"] = 0.05;
  values["data"]["dataset"] = "no-such-set";
  CHECK_THROWS_AS(rehash_values(values, fs::absolute(file)), expctl::util::DiagnosticError);
}

TEST_CASE("rehash: a canonical form of another recipe version is one change, nothing compared beside it") {
  TempDir dir;
  const Spec spec = load_spec(dir.write("s.yaml", "seed: 3\n"));
  auto old = nlohmann::json::parse(spec.canonical());
  old["expctl_spec_version"] = 1;
  const auto changes = canonical_changes(old.dump(), spec);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].kind == HashChange::Kind::recipe);
  CHECK_THAT(changes[0].text, Catch::Contains("hashed by version 1"));
}

TEST_CASE("rehash: the experiments' specs, pinned to a profile, on packaged data, hash again as loaded") {
  for (const char* name : {"quickstart.yaml", "cnn.yaml", "amp_accum.yaml", "tiny-synthetic.yaml"}) {
    CAPTURE(name);
    const fs::path file = expctl::test::source_dir() / "experiments" / name;
    const Spec spec = load_spec(file, {{"optim.lr=0.02", "seed=9"}});
    const auto again = rehash_values(nlohmann::json::parse(spec.values().dump()), fs::absolute(file));
    CHECK(again.hash() == spec.hash());
    CHECK(again.input_paths() == spec.input_paths());
  }
  // The profile's content is hashed: an edited profile is named.
  TempDir dir;
  dir.write("envs/pin.toml", "[libtorch]\nversion = \"1.13.*\"\n");
  const auto file = dir.write("s.yaml", "env: envs/pin.toml\n");
  const Spec spec = load_spec(file);
  const auto values = nlohmann::json::parse(spec.values().dump());
  dir.write("envs/pin.toml", "[libtorch]\nversion = \"1.12.*\"\n");
  const auto changes = canonical_changes(spec.canonical(), rehash_values(values, fs::absolute(file)));
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].text == "the env profile " + (dir / "envs" / "pin.toml").string() + " changed");
}
