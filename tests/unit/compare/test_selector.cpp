// Selector grammar and resolution against a store.
#include <algorithm>

#include "run_fixture.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/compare/selector.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"

namespace expctl::compare {
namespace {

TEST_CASE("selector grammar: every kind") {
  CHECK(parse_selector("20261129-223118-3fa9c2") ==
        Selector{SelectorKind::run, "20261129-223118-3fa9c2", 0, "20261129-223118-3fa9c2"});
  CHECK(parse_selector("tag:baseline:tiny") == Selector{SelectorKind::tag, "baseline:tiny", 0, "tag:baseline:tiny"});
  CHECK(parse_selector("spec:3fa9") == Selector{SelectorKind::spec_hash, "3fa9", 0, "spec:3fa9"});
  CHECK(parse_selector("@latest") == Selector{SelectorKind::latest, "", 0, "@latest"});
  CHECK(parse_selector("@latest~2") == Selector{SelectorKind::latest, "", 2, "@latest~2"});
  CHECK(parse_selector("experiments/tiny.yaml").kind == SelectorKind::spec_file);
  CHECK(parse_selector("tiny.yml").kind == SelectorKind::spec_file);
}

TEST_CASE("selector grammar: malformed selectors name themselves") {
  CHECK_THROWS_WITH(parse_selector("tag:"), Catch::StartsWith("bad run selector 'tag:': tag: needs a tag name"));
  CHECK_THROWS_WITH(parse_selector("spec:XYZ"), Catch::StartsWith("bad run selector 'spec:XYZ'"));
  CHECK_THROWS_WITH(parse_selector("@latest~"), Catch::StartsWith("bad run selector '@latest~'"));
  CHECK_THROWS_WITH(parse_selector("@latest~x"), Catch::Contains("must be a whole number"));
  CHECK_THROWS_WITH(parse_selector("@latest2"), Catch::Contains("expected @latest or @latest~N"));
  CHECK_THROWS_AS(parse_selector(""), util::CompareError);
}

TEST_CASE("selector grammar: all: makes a group of a tag, a spec hash or a spec file") {
  CHECK(parse_selector("all:tag:ab:x:a") == Selector{SelectorKind::tag, "ab:x:a", 0, "all:tag:ab:x:a", true});
  CHECK(parse_selector("all:spec:3fa9") == Selector{SelectorKind::spec_hash, "3fa9", 0, "all:spec:3fa9", true});
  CHECK(parse_selector("all:experiments/tiny.yaml").every);
  CHECK_FALSE(parse_selector("tag:ab:x:a").every);  // tag:NAME stays the newest run: baselines keep their meaning
  CHECK_THROWS_WITH(parse_selector("all:"), Catch::Contains("all: needs tag:NAME"));
  CHECK_THROWS_WITH(parse_selector("all:@latest"), Catch::Contains("which name several runs"));
  CHECK_THROWS_WITH(parse_selector("all:20261129"), Catch::Contains("which name several runs"));
  CHECK_THROWS_WITH(parse_selector("all:tag:"), Catch::StartsWith("bad run selector 'all:tag:': tag: needs a tag name"));
}

TEST_CASE("selector grammar: the parser is total over arbitrary bytes (returns or throws CompareError)") {
  std::uint32_t state = 12345;
  const auto next = [&state] { return (state = state * 1664525u + 1013904223u) >> 8; };
  // The grammar's characters, NUL, 0xFF and space included (an explicit length: a literal with an
  // embedded NUL would stop there), and one byte in four any of the 256.
  constexpr char k_alphabet[] = "al:tgspec@ltes~0123456789abcdef/.yml,\0\xff ";
  const std::string alphabet(k_alphabet, sizeof k_alphabet - 1);
  REQUIRE(alphabet.find('\0') != std::string::npos);
  int parsed = 0;
  int refused = 0;
  int with_nul = 0;
  int with_high_byte = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const auto length = next() % 16;
    for (std::uint32_t j = 0; j < length; ++j) {
      const auto pick = next();
      text += pick % 4 == 0 ? static_cast<char>((pick >> 2) & 0xFFu) : alphabet[(pick >> 2) % alphabet.size()];
    }
    with_nul += text.find('\0') != std::string::npos ? 1 : 0;
    with_high_byte += std::any_of(text.begin(), text.end(), [](char c) { return (c & 0x80) != 0; }) ? 1 : 0;
    CAPTURE(text);
    try {
      const auto group = store::parse_selectors(text);
      ++parsed;
      // What was parsed is the input: its elements, joined by commas, are the text as written.
      REQUIRE_FALSE(group.empty());
      std::string joined = group.front().text;
      for (std::size_t k = 1; k < group.size(); ++k) {
        joined += "," + group[k].text;
      }
      REQUIRE(joined == text);
    } catch (const util::CompareError& error) {
      ++refused;
      REQUIRE_THAT(error.what(), Catch::StartsWith("bad run selector '"));
    }
  }
  // Both outcomes happened, on inputs with the bytes the name promises.
  CHECK(parsed > 1000);
  CHECK(refused > 1000);
  CHECK(with_nul > 1000);
  CHECK(with_high_byte > 1000);
}

TEST_CASE("closest_names: prefixes and typos find their names, unrelated text finds none") {
  const std::vector<std::string> ids{"20261205-101500-aa01", "20261205-101501-bb02", "20251105-090000-cc03"};
  CHECK(store::closest_names(ids, "20261205-10150x") ==
        std::vector<std::string>{"20261205-101500-aa01", "20261205-101501-bb02"});
  CHECK(store::closest_names(ids, "nosuchrun").empty());
  CHECK(store::closest_names({"baseline:quickstart", "ab:x"}, "baseline:quikstart") ==
        std::vector<std::string>{"baseline:quickstart"});
}

TEST_CASE("a comma-separated list is a group") {
  const auto group = parse_group("a1,tag:x,@latest~1");
  REQUIRE(group.size() == 3);
  CHECK(group[0].kind == SelectorKind::run);
  CHECK(group[1].kind == SelectorKind::tag);
  CHECK(group[2].offset == 1);
  CHECK_THROWS_WITH(parse_group("a1,,a2"), Catch::Contains("empty element"));
  CHECK_THROWS_WITH(parse_group("a1,"), Catch::Contains("empty element"));
}

struct Fixture {
  test::TempDir dir;
  store::Store db = store::Store::open(dir / "expctl.db");
  std::vector<store::RunRecord> runs;

  Fixture() {
    for (int i = 0; i < 3; ++i) {
      testing::FakeRun run;
      run.start_offset_s = i * 60;
      run.spec["seed"] = i;
      if (i == 1) {
        run.tags = {"baseline:tiny"};
      }
      runs.push_back(testing::write_run(db, run));
    }
  }
};

TEST_CASE("selectors resolve to runs in the store") {
  Fixture f;
  CHECK(resolve_selector(f.db, parse_selector(f.runs[0].id)).id == f.runs[0].id);
  CHECK(resolve_selector(f.db, parse_selector("@latest")).id == f.runs[2].id);
  CHECK(resolve_selector(f.db, parse_selector("@latest~2")).id == f.runs[0].id);
  CHECK(resolve_selector(f.db, parse_selector("tag:baseline:tiny")).id == f.runs[1].id);
  CHECK(resolve_selector(f.db, parse_selector("spec:" + f.runs[2].spec_hash.substr(0, 10))).id == f.runs[2].id);
  const auto group = resolve_group(f.db, f.runs[0].id + "," + f.runs[1].id);
  REQUIRE(group.size() == 2);
  CHECK(group[1].id == f.runs[1].id);
}

TEST_CASE("all:tag:NAME is every run with the tag, tag:NAME the newest, and one-run commands refuse a group") {
  Fixture f;
  f.db.add_tag(f.runs[2].id, "baseline:tiny");
  CHECK(resolve_selector(f.db, parse_selector("tag:baseline:tiny")).id == f.runs[2].id);
  const auto every = resolve_group(f.db, "all:tag:baseline:tiny");
  REQUIRE(every.size() == 2);
  CHECK(every[0].id == f.runs[2].id);
  CHECK(every[1].id == f.runs[1].id);
  CHECK(resolve_one(f.db, "tag:baseline:tiny", "show").id == f.runs[2].id);
  CHECK_THROWS_WITH(resolve_one(f.db, "all:tag:baseline:tiny", "show"),
                    Catch::Contains("names 2 runs, and show takes one"));
  CHECK_THROWS_WITH(resolve_group(f.db, "tag:baseline:tny"),
                    Catch::Contains("no run has this tag; the closest tags: tag:baseline:tiny"));
}

TEST_CASE("selectors that match nothing are input errors naming the selector") {
  Fixture f;
  const auto exit_code_of = [&](const std::string& text) {
    try {
      resolve_group(f.db, text);
    } catch (const util::Failure& failure) {
      return std::pair{failure.exit_code(), std::string(failure.what())};
    }
    return std::pair{util::ExitCode::ok, std::string()};
  };
  const auto [missing_code, missing] = exit_code_of("nosuchrun");
  CHECK(missing_code == util::ExitCode::usage);
  CHECK_THAT(missing, Catch::Contains("nosuchrun"));
  CHECK_THAT(exit_code_of("@latest~3").second, Catch::Contains("\"@latest~3\" in ") &&
                                                   Catch::Contains(": the store holds 3 run(s)"));
  CHECK_THAT(exit_code_of("tag:nope").second, Catch::Contains("\"tag:nope\" in ") && Catch::Contains(": no run has this tag"));
  CHECK_THAT(exit_code_of("spec:ffffffff").second, Catch::Contains("\"spec:ffffffff\""));
  CHECK_THAT(exit_code_of("missing/spec.yaml").second, Catch::Contains("no such spec file"));
  CHECK_THAT(exit_code_of(f.runs[0].id + "," + f.runs[0].id).second, Catch::Contains("named twice"));
}

}  // namespace
}  // namespace expctl::compare

namespace expctl::compare {
namespace {

TEST_CASE("a spec file selects the newest run of its hash") {
  test::TempDir dir;
  auto db = store::Store::open(dir / "expctl.db");
  const auto file = dir.write("tiny.yaml", "name: tiny\ndata:\n  dataset: synthetic\n");
  const spec::Spec spec = spec::load_spec(file);
  testing::FakeRun older;
  older.canonical = spec.canonical();
  testing::write_run(db, older);
  testing::FakeRun newer = older;
  newer.start_offset_s = 60;
  const auto expected = testing::write_run(db, newer);
  testing::FakeRun other;
  other.start_offset_s = 120;
  testing::write_run(db, other);
  CHECK(resolve_selector(db, parse_selector(file.string())).id == expected.id);
}

}  // namespace
}  // namespace expctl::compare
