#include <catch2/catch.hpp>

#include "expctl/util/strings.hpp"

using namespace expctl::util;

TEST_CASE("strings: edit distance") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("lr", "lr") == 0);
  CHECK(edit_distance("lerning_rate", "learning_rate") == 1);
}

TEST_CASE("strings: closest match only for plausible typos") {
  const std::vector<std::string> keys{"lr", "momentum", "weight_decay", "betas"};
  CHECK(closest_match("momentun", keys) == std::optional<std::string>("momentum"));
  CHECK(closest_match("wieght_decay", keys) == std::optional<std::string>("weight_decay"));
  CHECK_FALSE(closest_match("completely_else", keys).has_value());
}

TEST_CASE("strings: UTF-8 validation") {
  CHECK(is_valid_utf8("plain ascii"));
  CHECK(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xff"));
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  CHECK_FALSE(is_valid_utf8("ok\xe2\x82"));        // truncated
  CHECK(first_invalid_utf8("ab\xff") == 2);
}

TEST_CASE("strings: split, join, trim, quoted") {
  CHECK(split("a,b,,c", ',') == std::vector<std::string>{"a", "b", "", "c"});
  const std::vector<std::string> parts{"x", "y"};
  CHECK(join(parts, ", ") == "x, y");
  CHECK(trim("  a b \n") == "a b");
  CHECK(quoted("a\"b\n") == R"("a\"b\n")");
}
