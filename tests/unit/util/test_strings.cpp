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

TEST_CASE("strings: terminal_safe escapes every control character a stored string may hold") {
  // Clear screen, a window title (OSC 0), the clipboard (OSC 52), a carriage return over the
  // line, DEL, and C1 controls in UTF-8 (U+009B is CSI on its own).
  const std::string hostile =
      "a\x1b[2Jb\x1b]0;title\x07"
      "c\x1b]52;c;cHduZWQ=\x1b\\d\re\x7f\xc2\x9b"
      "31mf\xc2\x85";
  const std::string safe = terminal_safe(hostile);
  CHECK(safe == R"(a\x1b[2Jb\x1b]0;title\x07c\x1b]52;c;cHduZWQ=\x1b\d\re\x7f\u009b31mf\u0085)");
  for (const char c : safe) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
    CHECK(c != 0x7f);
  }
  CHECK(terminal_safe(safe) == safe);  // idempotent
  // Text stays text: newlines and tabs in free text, UTF-8 letters (é is C3 A9, ‐ is E2 80 90).
  CHECK(terminal_safe("line 1\n\tline 2 \xc3\xa9\xe2\x80\x90\xc2\xa0") ==
        "line 1\n\tline 2 \xc3\xa9\xe2\x80\x90\xc2\xa0");
  CHECK(terminal_safe("a\nb\tc", /*keep_newlines=*/false) == R"(a\nb\tc)");
  CHECK(quoted("x\x1b[2Jy\x7f\xc2\x9b") == R"("x\x1b[2Jy\x7f\u009b")");
}
