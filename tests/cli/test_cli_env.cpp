#include <algorithm>
#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"

using expctl::test::run_expctl;
using expctl::test::source_dir;
using expctl::test::TempDir;

namespace {

const std::string k_secret = "supersecret-4f1c";

std::string data(const std::string& name) {
  return (source_dir() / "tests/data/env" / name).string();
}

nlohmann::json env_json(const std::map<std::string, std::optional<std::string>>& env = {}) {
  const auto result = run_expctl({"env", "--format", "json"}, env);
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(result.out);
}

// A spec that pins the profile `profile_text` (and optionally an image) in a fresh directory.
std::string write_spec(const TempDir& dir, const std::string& profile_text, const std::string& image = "") {
  dir.write("envs/p.toml", profile_text);
  std::string spec = "name: verify-test\nenv: envs/p.toml\n";
  if (!image.empty()) {
    spec += "container:\n  image: " + image + "\n";
  }
  return dir.write("exp.yaml", spec).string();
}

}  // namespace

TEST_CASE("cli env: text output is grouped and names the hash") {
  const auto result = run_expctl({"env"});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("fingerprint "));
  for (const char* heading :
       {"\nhost\n", "\ngpu\n", "\nsoftware\n", "\ncode\n", "\ncontainer\n", "\ndeterminism\n", "\nenv\n"}) {
    CHECK_THAT(result.out, Catch::Contains(heading));
  }
  CHECK_THAT(result.out, Catch::Contains("(not hashed)"));
}

TEST_CASE("cli env: JSON output is an envelope with typed, grouped fields and the hash") {
  const nlohmann::json document = env_json();
  CHECK(document["kind"] == "env");
  CHECK(document["format_version"] == 1);
  CHECK(document["hash"].get<std::string>().size() == 64);
  CHECK(document["fields"]["host"]["os_id"].is_string());
  CHECK(document["fields"]["host"]["cpu_logical_cores"].is_number_integer());
  CHECK(document["fields"]["gpu"]["count"].is_number_integer());
  CHECK(document["fields"]["code"]["dirty"].is_boolean());
  CHECK(document["fields"]["software"]["libraries"].is_object());
}

TEST_CASE("cli env: the BLAS and LAPACK LibTorch loads are named by their real files and packages") {
  // Debian's LibTorch links libblas.so.3 and liblapack.so.3, update-alternatives links whose
  // choice (reference BLAS, OpenBLAS...) BLAS_INFO does not show.
#ifndef EXPCTL_WITH_TORCH_PROVIDER
  expctl::test::skip("torch", "this expctl is built without LibTorch (EXPCTL_WITH_TORCH=OFF)");
  return;
#endif
  const auto software = env_json()["fields"]["software"];
  const auto libraries = software["libtorch_math_libraries"];
  INFO(libraries.dump(1));
  const auto libtorch_dir = std::filesystem::path(software["libtorch_library"].get<std::string>()).parent_path();
  for (const char* name : {"libblas.so.3", "liblapack.so.3"}) {
    REQUIRE(libraries.contains(name));
    const std::string value = libraries[name].get<std::string>();
    CHECK_THAT(value, Catch::Matches("/[^ ]+ \\(lib[^ ]+ [0-9][^ ]*\\)"));
    const std::filesystem::path file = value.substr(0, value.find(' '));
    CHECK(std::filesystem::is_regular_file(file));
    CHECK_FALSE(std::filesystem::is_symlink(file));
    CHECK(std::filesystem::equivalent(file, libtorch_dir / name));
  }
}

TEST_CASE("cli env: the hash is the same for two calls on one machine") {
  // .at(): a missing hash throws instead of comparing null with null.
  const std::string first = env_json().at("hash").get<std::string>();
  const std::string second = env_json().at("hash").get<std::string>();
  CHECK(first.size() == 64);
  CHECK(first == second);
}

TEST_CASE("cli env: a secret-looking variable never reaches the output") {
  const std::map<std::string, std::optional<std::string>> env{{"NCCL_API_TOKEN", k_secret},
                                                              {"TORCH_PASSWORD_FILE", k_secret}};
  const auto json = run_expctl({"env", "--format", "json"}, env);
  CHECK(json.exit_code == 0);
  CHECK(json.out.find(k_secret) == std::string::npos);
  CHECK(nlohmann::json::parse(json.out)["fields"]["env"]["vars"]["NCCL_API_TOKEN"] == "***");
  const auto text = run_expctl({"env"}, env);
  CHECK(text.out.find(k_secret) == std::string::npos);
  CHECK_THAT(text.out, Catch::Contains("NCCL_API_TOKEN=***"));
  CHECK(text.err.find(k_secret) == std::string::npos);
}

TEST_CASE("cli env: a secret pinned by a profile is masked in verify's table too") {
  TempDir dir;
  const std::string spec = write_spec(dir, "[env]\nNCCL_API_TOKEN = \"*\"\n");
  const auto result = run_expctl({"verify", spec}, {{"NCCL_API_TOKEN", k_secret}});
  CHECK(result.exit_code == 0);
  CHECK(result.out.find(k_secret) == std::string::npos);
  CHECK_THAT(result.out, Catch::Contains("env.NCCL_API_TOKEN  *       ***     ok"));
}

TEST_CASE("cli env diff: hand-made fingerprints that differ exit 3 with the grouped fields") {
  const auto result = run_expctl({"env", "diff", data("node_a.json"), data("node_b.json")});
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.out, Catch::Contains("gpu    driver_version"));
  CHECK_THAT(result.out, Catch::Contains("535.104.05"));
  CHECK_THAT(result.out, Catch::Contains("vars.OMP_NUM_THREADS"));
  CHECK_THAT(result.out, Catch::EndsWith("fingerprints differ\n"));
}

TEST_CASE("cli env diff: differences in unhashed fields only exit 0") {
  const auto result = run_expctl({"env", "diff", data("node_a.json"), data("node_c.json")});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("hostname"));
  CHECK_THAT(result.out,
             Catch::EndsWith("fingerprints identical (the differences above are in fields that are not hashed)\n"));
}

TEST_CASE("cli env diff: two fingerprints of this machine taken apart have equal hashes (exit 0)") {
  TempDir dir;
  const auto first = run_expctl({"env", "--format", "json"});
  const auto second = run_expctl({"env", "--format", "json"});
  const std::string a = dir.write("a.json", first.out).string();
  const std::string b = dir.write("b.json", second.out).string();
  const auto result = run_expctl({"env", "diff", a, b, "--format", "json"});
  CHECK(result.exit_code == 0);
  const nlohmann::json document = nlohmann::json::parse(result.out);
  CHECK(document["kind"] == "env-diff");
  CHECK(document["identical"] == true);
  for (const nlohmann::json& row : document["differences"]) {
    CAPTURE(row.dump());
    CHECK(row["hashed"] == false);  // uptime and free memory may move between the two calls
  }
  CHECK(document["a"]["hash"] == nlohmann::json::parse(first.out)["hash"]);
  CHECK(document["a"]["hash"] == document["b"]["hash"]);
}

TEST_CASE("cli env diff: a missing or malformed file is an input error") {
  TempDir dir;
  const auto missing = run_expctl({"env", "diff", "nope.json", data("node_a.json"), "--db", "none/expctl.db"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err ==
        "expctl: error: nope.json: neither a fingerprint file nor a run (no results database at none/expctl.db): "
        "give a file saved with expctl env --format json > FILE, or a run id with --db\n");
  const std::string bad = dir.write("bad.json", "{not json").string();
  const auto malformed = run_expctl({"env", "diff", bad, data("node_a.json")});
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(malformed.err, Catch::EndsWith("bad.json: not valid JSON: save a fingerprint with expctl env --format "
                                            "json > FILE\n"));
}

TEST_CASE("cli verify: a profile that matches this machine exits 0") {
  const nlohmann::json fields = env_json()["fields"];
  TempDir dir;
  const std::string spec = write_spec(
      dir, "[os]\nid = \"" + fields["host"]["os_id"].get<std::string>() + "\"\nversion = \"" +
               fields["host"]["os_version"].get<std::string>() + "\"\n[compiler]\nid = \"" +
               fields["software"]["compiler_id"].get<std::string>() + "\"\nversion = \"*\"\n[cudnn]\nversion = \"" +
               fields["gpu"]["cudnn"].get<std::string>() + "\"\n");
  const auto result = run_expctl({"verify", spec});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("field             pinned"));
  CHECK_THAT(result.out, Catch::EndsWith("this machine matches the pinned stack (5 pins)\n"));
}

TEST_CASE("cli verify: a profile that does not match exits 3 with the table") {
  TempDir dir;
  const std::string spec = write_spec(dir, "[os]\nid = \"no-such-os\"\n[libtorch]\nversion = \">=99\"\n");
  const auto result = run_expctl({"verify", spec});
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.out, Catch::Contains("os.id             no-such-os"));
  CHECK_THAT(result.out, Catch::Contains("MISMATCH"));
  CHECK_THAT(result.out, Catch::EndsWith("this machine does not match the pinned stack: 2 of 2 pins differ\n"));
  const auto json = run_expctl({"verify", spec, "--format", "json"});
  CHECK(json.exit_code == 3);
  const nlohmann::json document = nlohmann::json::parse(json.out);
  CHECK(document["ok"] == false);
  CHECK(document["rows"][0]["field"] == "os.id");
  CHECK(document["rows"][0]["ok"] == false);
}

TEST_CASE("cli verify: the spec's image pin holds against EXPCTL_IMAGE_DIGEST") {
  TempDir dir;
  const std::string digest = "sha256:" + std::string(64, 'a');
  const std::string spec = write_spec(dir, "description = \"image only\"\n", "registry.example.org/expctl@" + digest);
  CHECK(run_expctl({"verify", spec}, {{"EXPCTL_IMAGE_DIGEST", digest}}).exit_code == 0);
  const auto other = run_expctl({"verify", spec}, {{"EXPCTL_IMAGE_DIGEST", "sha256:" + std::string(64, 'b')}});
  CHECK(other.exit_code == 3);
  CHECK_THAT(other.out, Catch::Contains("spec container.image"));
  CHECK(run_expctl({"verify", spec}, {{"EXPCTL_IMAGE_DIGEST", std::nullopt}}).exit_code == 3);
}

TEST_CASE("cli verify: profile errors are positioned diagnostics (exit 2)") {
  TempDir dir;
  const std::string spec = write_spec(dir, "[os]\nidd = \"debian\"\n");
  const auto result = run_expctl({"verify", spec}, {}, dir.path().string());
  CHECK(result.exit_code == 2);
  CHECK(result.err ==
        "expctl: error: envs/p.toml:2:1: unknown key \"idd\" in \"os\" (did you mean \"id\"?)\n"
        "    2 | idd = \"debian\"\n"
        "      | ^\n");
}

TEST_CASE("cli verify: a spec that pins nothing has nothing to verify") {
  TempDir dir;
  const std::string spec = dir.write("exp.yaml", "name: free\n").string();
  const auto result = run_expctl({"verify", spec});
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::EndsWith("pins nothing (no env profile, no container.image): nothing to verify\n"));
}

TEST_CASE("cli env diff: a run selector reads the fingerprint the store recorded for that run") {
  TempDir dir;
  const std::string db = (dir.path() / "results/expctl.db").string();
  std::string run_id;
  {
    auto store = expctl::store::Store::open(db);
    std::ifstream in(data("node_b.json"));
    const nlohmann::json node_b = nlohmann::json::parse(in);
    const std::string spec_hash(64, 'c');
    store.put_spec(spec_hash, "{}", "diff-test");
    store.put_environment("envhash-b", node_b.dump());
    run_id = store.create_run({spec_hash, std::string("envhash-b"), "diff-test", std::nullopt}).id;
    store.put_environment("envhash-none", "{}");
  }
  const auto result = run_expctl({"--db", db, "env", "diff", data("node_a.json"), run_id});
  CHECK(result.exit_code == 3);
  CHECK_THAT(result.out, Catch::Contains("550.54.15"));
  CHECK_THAT(result.out, Catch::Contains("  " + run_id + "\n"));
  const auto unknown = run_expctl({"--db", db, "env", "diff", data("node_a.json"), "no-such-run"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Catch::Contains("no-such-run"));
}

namespace {

bool machine_has_nvidia_gpu() {
  std::error_code error;
  return std::filesystem::is_directory("/proc/driver/nvidia/gpus", error) &&
         !std::filesystem::is_empty("/proc/driver/nvidia/gpus", error);
}

}  // namespace

// Issue 41, observation 7: `backend: nccl` on a CPU machine passed validate and verify (the profile
// even pinned nccl = none) and only then failed as a recorded run.
TEST_CASE("cli validate: backend nccl against a profile that pins nccl none is refused by validate, verify and run "
          "before anything is recorded") {
  TempDir dir;
  dir.write("envs/p.toml", "[nccl]\nversion = \"none\"\n");
  const std::string spec = dir.write("exp.yaml", "name: nccl-test\nenv: envs/p.toml\ndistributed:\n  backend: nccl\n"
                                                 "data:\n  dataset: synthetic\ntrain:\n  max_steps: 5\n")
                               .string();
  const std::string db = (dir.path() / "results/expctl.db").string();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"validate", spec},
                                               std::vector<std::string>{"verify", spec},
                                               std::vector<std::string>{"--db", db, "run", spec}}) {
    const auto result = run_expctl(args);
    INFO(args.back() << ": " << result.out << result.err);
    CHECK(result.exit_code == 2);
    CHECK_THAT(result.err, Catch::Contains("distributed.backend nccl contradicts the spec's env profile ") &&
                               Catch::Contains("which pins nccl.version = \"none\" (line 2): use distributed.backend "
                                               "gloo (or auto) with this profile"));
    CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  }
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("cli validate: backend nccl without a CUDA GPU is refused before anything is recorded, and passes where "
          "there is one") {
  TempDir dir;
  const std::string spec =
      dir.write("exp.yaml", "name: nccl-test\ndistributed:\n  backend: nccl\ndata:\n  dataset: synthetic\n").string();
  const auto validated = run_expctl({"validate", spec});
  INFO(validated.out << validated.err);
  if (machine_has_nvidia_gpu()) {
    CHECK(validated.exit_code == 0);
    return;
  }
  const std::string refusal =
      "expctl: error: distributed.backend nccl needs a CUDA GPU, and this machine has none (gpu.count 0 in `expctl "
      "env`): use distributed.backend gloo, or auto (nccl where there are GPUs, gloo elsewhere)\n";
  CHECK(validated.exit_code == 2);
  CHECK(validated.err == refusal);
  const std::string db = (dir.path() / "results/expctl.db").string();
  const auto ran = run_expctl({"--db", db, "run", spec});
  CHECK(ran.exit_code == 2);
  CHECK(ran.err == refusal);
  CHECK_FALSE(std::filesystem::exists(db));
}

// Issue 41, observation 7: `env diff FILE RUN` on the machine that made the run exited 3
// "fingerprints differ" (the run's determinism flags and the git state of the spec's folder).
TEST_CASE("cli env diff: a fingerprint of this machine and checkout against a run of it is equal (exit 0)") {
  TempDir dir;
  const auto repo = dir / "project";
  std::filesystem::create_directories(repo / "experiments");
  std::filesystem::copy_file(source_dir() / "experiments" / "tiny-synthetic.yaml", repo / "experiments" / "tiny.yaml");
  const std::string git = "git -C '" + repo.string() + "' ";
  REQUIRE(std::system((git + "init -q && " + git + "add experiments && " + git +
                       "-c user.name=t -c user.email=t@example.com commit -q -m spec")
                          .c_str()) == 0);
  const std::string db = (repo / "results" / "expctl.db").string();
  const auto ran = run_expctl({"--db", db, "run", "experiments/tiny.yaml", "--set", "train.max_steps=5"}, {},
                              repo.string());
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  const auto taken = run_expctl({"env", "--format", "json"}, {}, repo.string());
  REQUIRE(taken.exit_code == 0);
  const auto file = dir.write("now.json", taken.out);
  const auto same = run_expctl({"--db", db, "env", "diff", file.string(), "@latest"});
  INFO(same.out << same.err);
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.out, Catch::Contains("note: the fingerprint without a spec is compared with the determinism "
                                       "settings run @latest set from its spec (determinism.deterministic_algorithms") &&
                           Catch::Contains("fingerprints identical"));

  // Taken outside the checkout: the code differs, and the note names the folder to take it in.
  const auto elsewhere = run_expctl({"env", "--format", "json"}, {}, dir.path().string());
  const auto outside = dir.write("outside.json", elsewhere.out);
  const auto differ = run_expctl({"--db", db, "env", "diff", outside.string(), "@latest"});
  CHECK(differ.exit_code == 3);
  CHECK_THAT(differ.out, Catch::Contains("the run's in its spec's folder " + (repo / "experiments").string() +
                                         ": compare a fingerprint taken there (expctl env --dir "));
}

TEST_CASE("cli env: a note names netlib's reference BLAS exactly when LibTorch loads it, on stderr and in the JSON") {
#ifndef EXPCTL_WITH_TORCH_PROVIDER
  expctl::test::skip("torch", "this build has no LibTorch, so no BLAS is probed");
  return;
#endif
  const nlohmann::json document = env_json();
  REQUIRE(document["notes"].is_array());
  const auto& libraries = document["fields"]["software"]["libtorch_math_libraries"];
  REQUIRE(libraries.contains("libblas.so.3"));
  const bool reference = libraries["libblas.so.3"].get<std::string>().find("(libblas3 ") != std::string::npos;
  const auto text = run_expctl({"env"});
  REQUIRE(text.exit_code == 0);
  CHECK(document["notes"].size() == (reference ? 1U : 0U));
  CHECK((text.err.find("note: LibTorch's BLAS is netlib's reference BLAS") != std::string::npos) == reference);
  // Standard output stays the fingerprint alone.
  CHECK(text.out.find("note:") == std::string::npos);
}
