#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/profile.hpp"

using namespace expctl::spec;
using expctl::test::TempDir;

TEST_CASE("profile: a relative env path is looked up in the spec's directory - then its parents") {
  const TempDir dir;
  const auto root_profile = dir.write("envs/cpu.toml", "a = 1\n");
  const auto spec = dir.write("experiments/deep/x.yaml", "");
  CHECK(resolve_profile_path(spec, "envs/cpu.toml") == root_profile);
  const auto near_profile = dir.write("experiments/envs/cpu.toml", "a = 2\n");
  CHECK(resolve_profile_path(spec, "envs/cpu.toml") == near_profile);
  const auto local = dir.write("experiments/deep/envs/cpu.toml", "a = 3\n");
  CHECK(resolve_profile_path(spec, "envs/cpu.toml") == local);
  CHECK_FALSE(resolve_profile_path(spec, "envs/missing.toml").has_value());
  CHECK(resolve_profile_path(spec, root_profile) == root_profile);
  CHECK_FALSE(resolve_profile_path(spec, "envs").has_value());  // a directory is not a profile
}

TEST_CASE("profile: TOML becomes JSON with integers - floats and dates kept apart") {
  const TempDir dir;
  const auto path = dir.write("p.toml",
                              "# comment\nname = \"x\"\n[a]\nn = 3\nf = 3.0\nb = true\nd = 2024-01-02\n"
                              "list = [1, 2]\n[a.sub]\ns = 'q'\n");
  const auto profile = load_profile(path, "p.toml");
  REQUIRE(profile.has_value());
  CHECK((*profile)["a"]["n"].is_number_integer());
  CHECK((*profile)["a"]["f"].is_number_float());
  CHECK((*profile)["a"]["b"] == true);
  CHECK((*profile)["a"]["d"] == "2024-01-02");
  CHECK((*profile)["a"]["list"] == nlohmann::json({1, 2}));
  CHECK((*profile)["a"]["sub"]["s"] == "q");
  CHECK((*profile)["name"] == "x");
}

TEST_CASE("profile: a TOML syntax error is a positioned diagnostic on the profile") {
  const TempDir dir;
  const auto path = dir.write("bad.toml", "[os]\nid = \"debian\"\nversion = 12\"\n");
  const auto profile = load_profile(path, "envs/bad.toml");
  REQUIRE_FALSE(profile.has_value());
  CHECK(profile.error().file == "envs/bad.toml");
  CHECK(profile.error().line == 3);
  CHECK(profile.error().column == 13);
  CHECK_THAT(profile.error().message, Catch::StartsWith("TOML syntax error: "));
  CHECK(profile.error().source_line == "version = 12\"");
}

TEST_CASE("profile: display paths are relative to the working directory when under it") {
  const auto cwd = std::filesystem::current_path();
  CHECK(display_path(cwd / "envs" / "x.toml") == "envs/x.toml");
  CHECK(display_path("/definitely/elsewhere.toml") == "/definitely/elsewhere.toml");
}
