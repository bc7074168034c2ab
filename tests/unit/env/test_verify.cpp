#include <fstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include <map>

#include "expctl/env/fingerprint.hpp"
#include "expctl/env/profile.hpp"
#include "expctl/env/verify.hpp"

using namespace expctl::env;

namespace {

const std::string k_digest = "sha256:" + std::string(64, '1');

Fingerprint node_a() {
  std::ifstream in(expctl::test::source_dir() / "tests/data/env/node_a.json");
  REQUIRE(in.good());
  return Fingerprint::from_json(nlohmann::json::parse(in), "node_a.json");
}

}  // namespace

TEST_CASE("verify: a matching profile gives one ok row per pin") {
  const Profile profile = parse_profile(
      "[os]\nid = \"rocky\"\nversion = \"9.*\"\n[libtorch]\nversion = \">=2.1,<3\"\ncuda = \">=12.1,<13\"\n"
      "[cudnn]\nversion = \"8.*\"\n[nccl]\nversion = \"*\"\n[env]\nOMP_NUM_THREADS = \"8\"\nSLURM_JOB_ID = \"*\"\n",
      "p.toml");
  const std::vector<VerifyRow> rows = verify_profile(profile, node_a());
  CHECK(rows.size() == 8);
  CHECK(all_ok(rows));
}

TEST_CASE("verify: drifted fields are marked and the table says so") {
  const Profile profile = parse_profile(
      "[os]\nid = \"debian\"\n[libtorch]\nversion = \"2.1.*\"\ncuda = \"none\"\n[env]\nCUBLAS_WORKSPACE_CONFIG = "
      "\":4096:8\"\n",
      "p.toml");
  const std::vector<VerifyRow> rows = verify_profile(profile, node_a());
  CHECK_FALSE(all_ok(rows));
  CHECK(render_verify_table(rows) ==
        "field                        pinned   actual  ok\n"
        "---------------------------  -------  ------  --------\n"
        "os.id                        debian   rocky   MISMATCH\n"
        "libtorch.version             2.1.*    2.1.0   ok\n"
        "libtorch.cuda                none     12.1    MISMATCH\n"
        "env.CUBLAS_WORKSPACE_CONFIG  :4096:8  none    MISMATCH\n");
  const nlohmann::json json = verify_rows_json(rows);
  CHECK(json[2] == nlohmann::json{{"field", "libtorch.cuda"}, {"pinned", "none"}, {"actual", "12.1"}, {"ok", false}});
}

TEST_CASE("verify: the spec's image pin compares sha256 digests, not names") {
  const Fingerprint fingerprint = node_a();
  CHECK(verify_image_pin("other.registry/expctl@" + k_digest, fingerprint).ok);
  CHECK_FALSE(
      verify_image_pin("registry.example.org/expctl/rocky9-cuda@sha256:" + std::string(64, '2'), fingerprint).ok);
  Fingerprint bare = fingerprint;
  bare.set("container.image_digest", "none");
  const VerifyRow row = verify_image_pin("expctl@" + k_digest, bare);
  CHECK_FALSE(row.ok);
  CHECK(row.actual == "none");
  CHECK(row.key == "spec container.image");
}

TEST_CASE("verify: a profile's container.image pin accepts a digest or a pattern") {
  const Fingerprint fingerprint = node_a();
  CHECK(all_ok(verify_profile(parse_profile("[container]\nimage = \"" + k_digest + "\"\n", "p.toml"), fingerprint)));
  CHECK(all_ok(verify_profile(parse_profile("[container]\nimage = \"*\"\n", "p.toml"), fingerprint)));
  CHECK_FALSE(all_ok(verify_profile(parse_profile("[container]\nimage = \"none\"\n", "p.toml"), fingerprint)));
}

TEST_CASE("verify: image digest parts") {
  CHECK(image_digest_part("a/b@" + k_digest) == k_digest);
  CHECK(image_digest_part(k_digest) == k_digest);
  CHECK(image_digest_part("a/b:latest").empty());
  CHECK(image_digest_part("sha256:").empty());
}

TEST_CASE("verify: nothing pinned, nothing drifted") {
  CHECK(all_ok({}));
  CHECK(verify_profile(parse_profile("description = \"empty\"\n", "p.toml"), node_a()).empty());
}

TEST_CASE("verify: a program's Python, torch and packages are pinned by [python] and [python.packages]") {
  const Profile profile = parse_profile(
      "[python]\nversion = \"3.11.*\"\ntorch = \"1.13.*\"\n[python.packages]\nNumPy = \"1.24.*\"\nscipy = \"none\"\n"
      "py_yaml = \"6.*\"\n",
      "p.toml");
  Fingerprint fingerprint;
  fingerprint.set("program.python_version", "3.11.2");
  fingerprint.set("program.torch_version", "2.1.0");
  fingerprint.set("program.python_packages", nlohmann::json::array({"numpy==1.24.2", "PyYAML==6.0", "torch==2.1.0"}));
  const auto rows = verify_profile(profile, fingerprint);
  REQUIRE(rows.size() == 5);
  std::map<std::string, std::pair<std::string, bool>> by_key;
  for (const auto& row : rows) {
    by_key[row.key] = {row.actual, row.ok};
  }
  CHECK(by_key.at("python.version") == std::pair<std::string, bool>{"3.11.2", true});
  CHECK(by_key.at("python.torch") == std::pair<std::string, bool>{"2.1.0", false});  // drift: refused unless --allow-drift
  CHECK(by_key.at("python.packages.NumPy") == std::pair<std::string, bool>{"1.24.2", true});
  CHECK(by_key.at("python.packages.scipy") == std::pair<std::string, bool>{"none", true});
  // Names are normalised as pip does (case, "-", "_", "."), never guessed: py_yaml is not PyYAML.
  CHECK(by_key.at("python.packages.py_yaml") == std::pair<std::string, bool>{"none", false});
}
