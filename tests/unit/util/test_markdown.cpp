#include <catch2/catch.hpp>

#include "expctl/util/markdown.hpp"

using namespace expctl;

TEST_CASE("markdown: text from runs starts no link, image, HTML, entity or cell end, and stays on its line") {
  CHECK(util::md_text("lr=0.1 final_train_loss") == "lr=0.1 final_train_loss");
  CHECK(util::md_text("![x](https://evil.example/p.png)") == "!\\[x\\](https://evil.example/p.png)");
  CHECK(util::md_text("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)\\>");
  CHECK(util::md_text("a | b") == "a \\| b");
  CHECK(util::md_text("&lt;") == "\\&lt;");
  // A backslash the text holds cannot cancel the escape that follows it.
  CHECK(util::md_text("\\[x]") == "\\\\\\[x\\]");
  CHECK(util::md_text("one\ntwo\r\tthree") == "one two  three");
  CHECK(util::md_text("p = 0.388 > 0.005") == "p = 0.388 \\> 0.005");
}

TEST_CASE("markdown: a code span holds any backtick run, never ends a table cell, and stays on its line") {
  CHECK(util::md_code("optim.lr") == "`optim.lr`");
  CHECK(util::md_code("a`b") == "``a`b``");
  CHECK(util::md_code("``x") == "``` ``x ```");
  CHECK(util::md_code("a|b\nc") == "`a\\|b c`");
  CHECK(util::md_code("") == "``");
}
