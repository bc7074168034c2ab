#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;
using expctl::util::DiagnosticError;

namespace fs = std::filesystem;

namespace {

constexpr const char* k_profile =
    "# a pinned stack\n[os]\nid = \"debian\"\nversion = \"12\"\n[libtorch]\nversion = \"1.13.*\"\n";

// A spec directory with envs/p.toml, like a checkout.
struct Workspace {
  TempDir dir;
  Workspace() { dir.write("envs/p.toml", k_profile); }
  Spec load(const std::string& yaml, std::vector<std::string> overrides = {},
            const std::string& name = "s.yaml") const {
    return load_spec(dir.write(name, yaml), LoadOptions{std::move(overrides)});
  }
  std::string hash(const std::string& yaml, std::vector<std::string> overrides = {}) const {
    return load(yaml, std::move(overrides)).hash();
  }
};

std::string report_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DiagnosticError& error) {
    return error.report();
  }
  FAIL("expected a DiagnosticError");
  return {};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs a test with the source tree as working directory, so messages name files as users see them.
class InSourceDir {
 public:
  InSourceDir() : m_previous(fs::current_path()) { fs::current_path(expctl::test::source_dir()); }
  ~InSourceDir() { fs::current_path(m_previous); }

 private:
  fs::path m_previous;
};

const char* const k_known_answer_spec = R"(# known answer
name: known-answer
env: envs/p.toml
seed: 3
distributed: {nproc_per_node: 2, backend: gloo}
data: {root: /nonexistent/expctl-known-answer}
optim: {name: adamw, lr: 3e-4}
train: {max_steps: 100}
)";

}  // namespace

TEST_CASE("spec: known answer: canonical bytes and hash are pinned") {
  const Workspace ws;
  const Spec spec = ws.load(k_known_answer_spec);
  // A change here changes every spec hash: bump k_spec_version and say so in docs/spec.md.
  CHECK(
      spec.canonical() ==
      R"({"env_profile":{"libtorch":{"version":"1.13.*"},"os":{"id":"debian","version":"12"}},)"
      R"("expctl_spec_version":2,"inputs":{"data.root/t10k-images-idx3-ubyte.gz":"absent",)"
      R"("data.root/t10k-labels-idx1-ubyte.gz":"absent","data.root/train-images-idx3-ubyte.gz":"absent",)"
      R"("data.root/train-labels-idx1-ubyte.gz":"absent"},)"
      R"("spec":{"container":{"image":""},"data":{"batch_size":64,"dataset":"fashion-mnist",)"
      R"("drop_last":false,"input_shape":[1,28,28],"normalize":true,"num_classes":10,"num_samples":1024,"shuffle":true},)"
      R"("determinism":"strict","distributed":{"backend":"gloo","bucket_cap_mb":25.0,"grad_compression":"none",)"
      R"("nnodes":1,"nproc_per_node":2},"model":{"arch":"mlp","channels":[32,64],"dense":0,"dropout":0.0,"hidden_sizes":[256,128]},)"
      R"("optim":{"betas":[0.9,0.999],"eps":1e-08,"lr":0.0003,"momentum":0.9,"name":"adamw","nesterov":false,)"
      R"("weight_decay":0.0},"schedule":{"gamma":0.1,"min_lr":0.0,"name":"constant","step_size":1000,"warmup_steps":0},)"
      R"("seed":3,"train":{"amp":{"dtype":"bf16","enabled":false},"epochs":0,"eval_every":0,"grad_accum_steps":1,)"
      R"("grad_clip_norm":0.0,"max_steps":100}}})");
  CHECK(spec.hash() == "178427c44e732d87fb48e74db6ff9604846be4fc5f7f222890a0e90eb60780e5");
}

TEST_CASE("spec: defaults fill every field - derived defaults follow other fields") {
  const Workspace ws;
  const Spec spec = ws.load("{}\n", {}, "my-exp.yaml");
  CHECK(spec.get_string("name") == "my-exp");
  CHECK(spec.get_string("data.root") == "/usr/share/datasets/fashion-mnist");
  CHECK(spec.get_int("train.epochs") == 1);
  CHECK(spec.get_int("train.max_steps") == 0);
  CHECK(spec.get_float("distributed.bucket_cap_mb") == 25.0);
  CHECK(spec.get_bool("data.shuffle"));
  CHECK(spec.get_string("distributed.backend") == "auto");
  CHECK(spec.get_string("container.image").empty());
  CHECK(spec.get_int_list("model.hidden_sizes") == std::vector<int64_t>{256, 128});
  CHECK(spec.get_float_list("optim.betas") == std::vector<double>{0.9, 0.999});
  CHECK(spec.get_string_list("tags").empty());
  CHECK_FALSE(spec.env_profile_path().has_value());
  CHECK(spec.env_profile().is_null());
  CHECK(spec.hash().size() == 64);
  CHECK(ws.load("data: {dataset: mnist}\ntrain: {max_steps: 5}\n").get_string("data.root") ==
        "/usr/share/datasets/mnist");
  CHECK(ws.load("train: {max_steps: 5}\n").get_int("train.epochs") == 0);
}

TEST_CASE("spec: typed getters refuse a path of another type (internal error)") {
  const Workspace ws;
  const Spec spec = ws.load("{}\n");
  CHECK_THROWS_AS(spec.get_int("optim.lr"), expctl::util::InternalError);
  CHECK_THROWS_AS(spec.get_string("optim.nosuch"), expctl::util::InternalError);
}

TEST_CASE("spec: env profile is resolved from the spec's directory upwards and hashed by content") {
  const Workspace ws;
  const Spec spec = ws.load("env: envs/p.toml\n", {}, "experiments/a/x.yaml");
  REQUIRE(spec.env_profile_path().has_value());
  CHECK(*spec.env_profile_path() == ws.dir.path() / "envs" / "p.toml");
  CHECK(spec.env_profile()["os"]["id"] == "debian");

  // Same content, other layout and path: same hash. Other content: another hash.
  ws.dir.write("envs/copy.toml", "[libtorch]\nversion='1.13.*'\n\n[os]\nversion = \"12\" # comment\nid = \"debian\"\n");
  ws.dir.write("envs/other.toml", std::string(k_profile) + "[compiler]\nid = \"gnu\"\n");
  const std::string base = ws.hash("env: envs/p.toml\n");
  CHECK(ws.hash("env: envs/copy.toml\n") == base);
  CHECK(ws.hash("env: envs/other.toml\n") != base);
  CHECK(ws.hash("{}\n") != base);
}

TEST_CASE("spec: --set overrides are typed by the field table and applied after the file") {
  const Workspace ws;
  const Spec spec = ws.load("data: {batch_size: 64}\n", {"data.batch_size=128", "optim.lr=1e-2", "tags=[a, b]",
                                                         "name=", "distributed.backend='gloo'"});
  CHECK(spec.get_int("data.batch_size") == 128);
  CHECK(spec.values()["data"]["batch_size"].is_number_integer());
  CHECK(spec.get_float("optim.lr") == 0.01);
  CHECK(spec.get_string_list("tags") == std::vector<std::string>{"a", "b"});
  CHECK(spec.get_string("name") == "s");
  CHECK(spec.get_string("distributed.backend") == "gloo");
  CHECK(ws.hash("optim: {lr: 0.01}\n") == ws.hash("{}\n", {"optim.lr=0.010"}));
  CHECK(ws.hash("{}\n", {"seed=1", "seed=2"}) == ws.hash("seed: 2\n"));
}

TEST_CASE("spec: run's --nnodes is a typed distributed.nnodes after the overrides, hashed as --set would be") {
  const Workspace ws;
  const fs::path file = ws.dir.write("n.yaml", "distributed: {nnodes: 3}\n");
  const Spec typed = load_spec(file, LoadOptions{{"distributed.nnodes=4"}, 2});
  CHECK(typed.get_int("distributed.nnodes") == 2);  // after the --set, as `run --nnodes 2 --set ...=4` always was
  CHECK(typed.values()["distributed"]["nnodes"].is_number_integer());
  CHECK(typed.hash() == load_spec(file, LoadOptions{{"distributed.nnodes=2"}}).hash());
  CHECK(typed.canonical() ==
        load_spec(file, LoadOptions{{"distributed.nnodes=4", "distributed.nnodes=2"}}).canonical());
  CHECK(load_spec(file, LoadOptions{{}, std::nullopt}).get_int("distributed.nnodes") == 3);
  CHECK(report_of([&] {
          load_spec(file, LoadOptions{{}, 2000});
        }) == "expctl: error: --nnodes 2000: distributed.nnodes must be between 1 and 1024, found 2000");
}

TEST_CASE("spec: an invalid override is reported by name - with the file's problems") {
  const Workspace ws;
  const std::string report = report_of([&] {
    ws.load("seed: x\n", {"optim.lr=abc", "optim.lerning_rate=1", "optim=1", "seed", "data.batch_size=\"64\"",
                          "train.amp.dtype=fp16", "distributed.backend=gloo", "train.amp.enabled=true"});
  });
  const std::string file = (ws.dir.path() / "s.yaml").string();
  CHECK(report ==
        "expctl: error: " + file +
            ":1:7: seed must be an integer, found \"x\"\n"
            "    1 | seed: x\n"
            "      |       ^\n"
            "expctl: error: --set optim.lr=abc: optim.lr must be a float, found \"abc\"\n"
            "expctl: error: --set optim.lerning_rate=1: unknown field \"optim.lerning_rate\" (did you mean "
            "\"optim.lr\"?)\n"
            "expctl: error: --set optim=1: \"optim\" is a section: set one of its fields (name, lr, momentum, "
            "nesterov, weight_decay, betas, eps)\n"
            "expctl: error: --set seed: expected key.path=value, e.g. --set optim.lr=0.1\n"
            "expctl: error: --set data.batch_size=\"64\": data.batch_size must be an integer, found the string "
            "\"64\" (write it without quotes)\n"
            "expctl: error: --set train.amp.dtype=fp16: train.amp.dtype fp16 needs CUDA, but "
            "distributed.backend gloo is CPU-only: use train.amp.dtype bf16 or distributed.backend nccl\n"
            "expctl: 7 errors in " +
            file);
}

TEST_CASE("spec: every invalid spec in tests/data/specs/invalid gives exactly its expected message") {
  const InSourceDir in_source;
  const fs::path directory = "tests/data/specs/invalid";
  std::vector<fs::path> specs;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (entry.path().extension() == ".yaml") {
      specs.push_back(entry.path());
    }
  }
  std::sort(specs.begin(), specs.end());
  REQUIRE(specs.size() >= 20);
  for (const fs::path& spec : specs) {
    fs::path expected_path = spec;
    expected_path.replace_extension(".expected");
    INFO(spec.string());
    REQUIRE(fs::exists(expected_path));
    std::string expected = read_text(expected_path);
    while (!expected.empty() && expected.back() == '\n') {
      expected.pop_back();
    }
    CHECK(report_of([&] { load_spec(spec); }) == expected);
  }
}

TEST_CASE("spec: a huge file is refused before it is read - and a big one with many errors is cut short") {
  const Workspace ws;
  const auto huge = ws.dir.write("huge.yaml", "# " + std::string(3 * 1024 * 1024, 'x') + "\n");
  CHECK(report_of([&] { load_spec(huge); }) ==
        "expctl: error: " + huge.string() + ": the file is 3145731 bytes, more than the 1 MiB limit for a spec");

  std::string many;
  for (int i = 0; many.size() < 200 * 1024; ++i) {
    many += "key" + std::to_string(i) + ": 1\n";
  }
  const std::string report = report_of([&] { ws.load(many); });
  CHECK_THAT(report, Catch::Contains("more errors not shown: fix the ones above first"));
  CHECK_THAT(report, Catch::EndsWith("expctl: 51 errors in " + (ws.dir.path() / "s.yaml").string()));

  std::string nodes = "a: [";
  while (nodes.size() < 1000 * 1000) {
    nodes += "1,";
  }
  CHECK_THAT(report_of([&] { ws.load(nodes + "1]\n"); }),
             Catch::Contains("the document has more than 100000 nodes: a spec needs a few hundred"));
}

TEST_CASE("spec: missing and unreadable spec files are diagnostics") {
  const Workspace ws;
  const fs::path missing = ws.dir.path() / "nope.yaml";
  CHECK(report_of([&] { load_spec(missing); }) ==
        "expctl: error: " + missing.string() + ": no such file: check the path");
  CHECK(report_of([&] { load_spec(ws.dir.path()); }) ==
        "expctl: error: " + ws.dir.path().string() + ": not a regular file: a spec is a YAML text file");
}

TEST_CASE("spec: diff_specs lists changed fields with their hashed flag") {
  const Workspace ws;
  const Spec a = ws.load("name: a\nseed: 1\noptim: {lr: 0.1}\n", {}, "a.yaml");
  const Spec b = ws.load("name: b\nseed: 1\noptim: {lr: 0.2}\nenv: envs/p.toml\n", {}, "b.yaml");
  const auto changes = diff_specs(a, b);
  REQUIRE(changes.size() == 4);
  CHECK(changes[0].path == "name");
  CHECK_FALSE(changes[0].hashed);
  CHECK(changes[1].path == "env");
  CHECK_FALSE(changes[1].hashed);
  CHECK(changes[2].path == "optim.lr");
  CHECK(changes[2].old_value == 0.1);
  CHECK(changes[2].new_value == 0.2);
  CHECK(changes[2].hashed);
  CHECK(changes[3].path == "env (profile content)");
  CHECK(changes[3].hashed);
  CHECK(diff_specs(a, a).empty());
}

TEST_CASE("spec: diff_values works on stored trees with missing fields") {
  const Workspace ws;
  const Spec a = ws.load("seed: 1\n", {}, "a.yaml");
  const Spec b = ws.load("seed: 2\n", {}, "b.yaml");
  const auto canonical_a = nlohmann::json::parse(a.canonical())["spec"];
  const auto canonical_b = nlohmann::json::parse(b.canonical())["spec"];
  const auto changes = diff_values(canonical_a, canonical_b);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].path == "seed");
  CHECK(changes[0].old_value == 1);
  CHECK(changes[0].new_value == 2);
  const auto against_empty = diff_values(canonical_a, nlohmann::json::object());
  CHECK(static_cast<std::ptrdiff_t>(against_empty.size()) ==
        std::count_if(fields().begin(), fields().end(), [](const Field& f) { return f.hashing == Hashing::hashed; }));
  CHECK(against_empty.front().new_value.is_null());
}
