#include <catch2/catch.hpp>

#include "expctl/spec/yaml_tree.hpp"

using expctl::spec::load_yaml;
using expctl::spec::YamlLimits;
using expctl::spec::YamlNode;
using Kind = expctl::spec::YamlNode::Kind;

namespace {

const YamlNode& value_of(const YamlNode& mapping, const std::string& key) {
  for (const auto& entry : mapping.entries) {
    if (entry.key.value == key) {
      return entry.value;
    }
  }
  FAIL("no key " << key);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("yaml_tree: mappings - lists and positions (1-based)") {
  const auto doc = load_yaml("a: 1\nb:\n  - x\n  - 'y'\n", "t.yaml");
  REQUIRE(doc.diagnostics.empty());
  REQUIRE(doc.root.kind == Kind::mapping);
  const YamlNode& b = value_of(doc.root, "b");
  REQUIRE(b.kind == Kind::sequence);
  REQUIRE(b.items.size() == 2);
  CHECK(b.items[1].value == "y");
  CHECK(b.items[1].mark.line == 4);
  CHECK(b.items[1].mark.column == 5);
  CHECK(value_of(doc.root, "a").mark.column == 4);
}

TEST_CASE("yaml_tree: quoted scalars are told apart from plain ones") {
  const auto doc = load_yaml("a: 64\nb: \"64\"\nc: '64'\nd: !!str 64\ne: ~\nf:\n", "t.yaml");
  REQUIRE(doc.diagnostics.empty());
  CHECK_FALSE(value_of(doc.root, "a").quoted);
  CHECK(value_of(doc.root, "b").quoted);
  CHECK(value_of(doc.root, "c").quoted);
  CHECK(value_of(doc.root, "d").quoted);
  CHECK(value_of(doc.root, "e").kind == Kind::null);
  CHECK(value_of(doc.root, "f").kind == Kind::null);
}

TEST_CASE("yaml_tree: small aliases are expanded") {
  const auto doc = load_yaml("base: &b [1, 2]\ncopy: *b\n", "t.yaml");
  REQUIRE(doc.diagnostics.empty());
  const YamlNode& copy = value_of(doc.root, "copy");
  REQUIRE(copy.kind == Kind::sequence);
  CHECK(copy.items.size() == 2);
  CHECK(copy.mark.line == 2);
}

TEST_CASE("yaml_tree: an alias bomb is refused by the node budget - quickly") {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 12; ++level) {
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) {
      text += (i ? ", *a" : "*a") + std::to_string(level - 1);
    }
    text += "]\n";
  }
  const auto doc = load_yaml(text, "bomb.yaml");
  CHECK(doc.aborted);
  REQUIRE(doc.diagnostics.size() == 1);
  CHECK_THAT(doc.diagnostics[0].message, Catch::Contains("more than 100000 nodes"));
}

TEST_CASE("yaml_tree: nesting past the depth limit is refused - even far past yaml-cpp's own guard") {
  for (const int depth : {65, 5000, 100000}) {
    const auto doc = load_yaml("a: " + std::string(depth, '[') + std::string(depth, ']'), "deep.yaml");
    CHECK(doc.aborted);
    REQUIRE(doc.diagnostics.size() == 1);
    CHECK_THAT(doc.diagnostics[0].message, Catch::StartsWith("nesting is deeper than 64 levels"));
  }
  const auto ok = load_yaml("a: " + std::string(60, '[') + std::string(60, ']'), "ok.yaml");
  CHECK(ok.diagnostics.empty());
}

TEST_CASE("yaml_tree: duplicate keys are reported with both positions - and the first value wins") {
  const auto doc = load_yaml("x: 1\ny: 2\nx: 3\n", "dup.yaml");
  REQUIRE(doc.diagnostics.size() == 1);
  CHECK(doc.diagnostics[0].line == 3);
  CHECK(doc.diagnostics[0].column == 1);
  CHECK(doc.diagnostics[0].message == "duplicate key \"x\" (first defined at line 1, column 1): keep one of them");
  CHECK_FALSE(doc.aborted);
  CHECK(value_of(doc.root, "x").value == "1");
}

TEST_CASE("yaml_tree: bytes are checked before parsing: size cap - NUL - UTF-8") {
  SECTION("too large") {
    const auto doc = load_yaml(std::string(2048, '#'), "big.yaml", YamlLimits{1024, 64, 100000});
    REQUIRE(doc.diagnostics.size() == 1);
    CHECK(doc.diagnostics[0].line == 0);
    CHECK_THAT(doc.diagnostics[0].message, Catch::Contains("limit"));
  }
  SECTION("NUL byte, with its position") {
    const auto doc = load_yaml(std::string("a: 1\nbb: \0\n", 10), "nul.yaml");
    REQUIRE(doc.diagnostics.size() == 1);
    CHECK(doc.diagnostics[0].line == 2);
    CHECK(doc.diagnostics[0].column == 5);
    CHECK(doc.diagnostics[0].source_line == "bb: ?");
  }
  SECTION("bad UTF-8, with the position of the bad byte") {
    const auto doc = load_yaml("a: 1\nname: caf\xE9!\n", "latin1.yaml");
    REQUIRE(doc.diagnostics.size() == 1);
    CHECK(doc.diagnostics[0].line == 2);
    CHECK(doc.diagnostics[0].column == 10);
    CHECK(doc.diagnostics[0].message == "invalid UTF-8 (byte 0xE9): save the file as UTF-8");
  }
}

TEST_CASE("yaml_tree: syntax errors carry a position - empty input has no document") {
  const auto bad = load_yaml("a: [1, 2\nb: 3\n", "bad.yaml");
  CHECK(bad.aborted);
  REQUIRE(bad.diagnostics.size() == 1);
  CHECK(bad.diagnostics[0].line > 0);
  CHECK_THAT(bad.diagnostics[0].message, Catch::StartsWith("YAML syntax error: "));
  CHECK(load_yaml("", "e.yaml").empty);
  CHECK(load_yaml("# just a comment\n", "e.yaml").empty);
}

TEST_CASE("yaml_tree: a second document is refused") {
  const auto doc = load_yaml("a: 1\n---\nb: 2\n", "two.yaml");
  REQUIRE(doc.diagnostics.size() == 1);
  CHECK(doc.diagnostics[0].line == 2);
}

TEST_CASE("yaml_tree: non-scalar keys and recursive aliases are refused") {
  CHECK_THAT(load_yaml("? [a, b]\n: 1\n", "k.yaml").diagnostics.at(0).message,
             Catch::StartsWith("a key must be a plain name"));
  const auto recursive = load_yaml("a: &x [*x]\n", "r.yaml");
  CHECK_FALSE(recursive.diagnostics.empty());
}

TEST_CASE("yaml_tree: printable_line hides control bytes and bad UTF-8") {
  CHECK(expctl::spec::printable_line("ok\nb\x01\xFFz\tq\n", 2) == "b??z\tq");
  CHECK(expctl::spec::printable_line("caf\xC3\xA9", 1) == "caf\xC3\xA9");
  CHECK(expctl::spec::printable_line(std::string(501, 'x'), 1).empty());
  CHECK(expctl::spec::printable_line(std::string(500, 'x'), 1).size() == 500);
}
