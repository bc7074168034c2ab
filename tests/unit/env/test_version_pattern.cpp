#include <catch2/catch.hpp>

#include "expctl/env/version_pattern.hpp"

using expctl::env::compare_versions;
using expctl::env::glob_match;
using expctl::env::VersionPattern;

namespace {

VersionPattern pattern(const char* text) {
  auto parsed = VersionPattern::parse(text);
  REQUIRE(parsed.has_value());
  return *parsed;
}

std::string parse_error(const char* text) {
  auto parsed = VersionPattern::parse(text);
  REQUIRE_FALSE(parsed.has_value());
  return parsed.error().message;
}

}  // namespace

TEST_CASE("version pattern: versions compare numerically per component") {
  CHECK(compare_versions("12.10", "12.9") > 0);
  CHECK(compare_versions("12.1", "12.1.0") == 0);
  CHECK(compare_versions("1.13.1+dfsg", "1.13.1") == 0);
  CHECK(compare_versions("525.60.13", "535.104.05") < 0);
  CHECK(compare_versions("2", "11") < 0);
}

TEST_CASE("version pattern: globs match whole strings") {
  CHECK(glob_match("1.13.*", "1.13.1"));
  CHECK(glob_match("1.13.*", "1.13."));
  CHECK_FALSE(glob_match("1.13.*", "1.14.0"));
  CHECK_FALSE(glob_match("1.13.*", "11.13.0"));
  CHECK(glob_match("9.?", "9.3"));
  CHECK_FALSE(glob_match("9.?", "9.10"));
  CHECK(glob_match("*cuda*", "libtorch-cuda-12"));
}

TEST_CASE("version pattern: an exact value matches only itself") {
  const VersionPattern exact = pattern("12");
  CHECK(exact.kind() == VersionPattern::Kind::exact);
  CHECK(exact.matches("12"));
  CHECK_FALSE(exact.matches("12.0"));
  CHECK_FALSE(exact.matches("none"));
}

TEST_CASE("version pattern: a range holds every comparison") {
  const VersionPattern range = pattern(">=12.1,<13");
  CHECK(range.kind() == VersionPattern::Kind::range);
  CHECK(range.matches("12.1"));
  CHECK(range.matches("12.4.131"));
  CHECK_FALSE(range.matches("12.0"));
  CHECK_FALSE(range.matches("13.0"));
  CHECK_FALSE(range.matches("none"));
  CHECK(pattern("!=2.1").matches("2.2"));
  CHECK_FALSE(pattern("!=2.1").matches("2.1.0"));
  CHECK(pattern("== 11.8").matches("11.8.0"));
  CHECK(pattern(">450.80.02").matches("535.104.05"));
  CHECK(pattern("<=9").matches("9.0"));
}

TEST_CASE("version pattern: * wants a present value, none an absent one") {
  CHECK(pattern("*").matches("8.9.7"));
  CHECK_FALSE(pattern("*").matches("none"));
  CHECK(pattern("none").matches("none"));
  CHECK_FALSE(pattern("none").matches("11.8"));
}

TEST_CASE("version pattern: malformed patterns say what is wrong") {
  CHECK(parse_error("") == "empty pattern: write a version, \"*\" (any) or \"none\"");
  CHECK(parse_error("=>12") == "\"=>12\" in range \"=>12\": each comparison starts with >=, >, <=, <, == or !=");
  CHECK(parse_error(">=12,<") == "\"<\" in range \">=12,<\": < must be followed by a version such as 12.1");
  CHECK(parse_error(">=1.*") == "\">=1.*\" in range \">=1.*\": >= must be followed by a version such as 12.1");
}
