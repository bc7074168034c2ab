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

TEST_CASE("profile: keys nested past 64 levels are refused - not a stack overflow") {
  const TempDir dir;
  // a.a.a... = 1 and [a.a.a...]: 200 000 nested tables in 400 KB, under the 1 MiB cap. Found by
  // fuzz_env_profile: 20 000 levels overflowed the recursive conversion to JSON, 32 000 toml++'s
  // own parser (sanitizer build; 500 000 a release build's).
  std::string key = "a";
  for (int i = 0; i < 200000; ++i) {
    key += ".a";
  }
  for (const std::string& text : {key + " = 1\n", "[" + key + "]\nx = 1\n", "x = {" + key + " = 1}\n"}) {
    const auto deep = load_profile(dir.write("deep.toml", text), "deep.toml");
    REQUIRE_FALSE(deep.has_value());
    CHECK(deep.error().message == "keys nested more than 64 levels deep (a.b.c... or [a.b.c...]): a profile needs two "
                                  "or three");
  }
  std::string shallow = "a";
  for (int i = 0; i < 63; ++i) {
    shallow += ".a";
  }
  // 64 levels pass; floats, dates and dotted strings are values, not keys.
  const auto ok = load_profile(dir.write("ok.toml", "[" + shallow + "]\nx = [1.5, 2.5, 3.5, 4.5]\n"
                                                    "t = 1979-05-27T07:32:00.999Z\nu = \"1.2.3.4.5.6.7\"\n"
                                                    "v = \"\"\"\n" + shallow + "\n\"\"\"\n# " + shallow + "\n"),
                               "ok.toml");
  CHECK(ok.has_value());
  // Arrays past toml++'s nesting limit (TOML_MAX_NESTED_VALUES, set to 64) are a syntax error.
  const auto arrays = load_profile(dir.write("arrays.toml", "a = " + std::string(100, '[') + std::string(100, ']')),
                                   "arrays.toml");
  REQUIRE_FALSE(arrays.has_value());
  CHECK_THAT(arrays.error().message, Catch::Contains("nested"));
}

TEST_CASE("profile: a profile over 1 MiB is refused before parsing") {
  const TempDir dir;
  const auto big = load_profile(dir.write("big.toml", "# " + std::string(1024 * 1024, 'x') + "\n"), "big.toml");
  REQUIRE_FALSE(big.has_value());
  CHECK(big.error().message == "the profile is 1048579 bytes, more than the 1 MiB limit");
}
