#include <fstream>
#include <set>
#include <sstream>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/spec/convert.hpp"
#include "expctl/spec/field_table.hpp"

using namespace expctl::spec;

TEST_CASE("field_table: every default is valid for its own field") {
  for (const Field& field : fields()) {
    INFO(field.path);
    CHECK_NOTHROW(default_value(field));
  }
}

TEST_CASE("field_table: paths are unique and no field is also a section") {
  std::set<std::string_view> seen;
  for (const Field& field : fields()) {
    INFO(field.path);
    CHECK(seen.insert(field.path).second);
    CHECK_FALSE(is_section(field.path));
    CHECK((field.type == FieldType::choice) == !field.choices.empty());
    CHECK_FALSE(field.doc.empty());
  }
}

TEST_CASE("field_table: lookups - sections and child names") {
  REQUIRE(find_field("optim.lr") != nullptr);
  CHECK(find_field("optim.lr")->type == FieldType::floating);
  CHECK(find_field("optim") == nullptr);
  CHECK(is_section("optim"));
  CHECK(is_section("train.amp"));
  CHECK_FALSE(is_section("train.amp.enabled"));
  CHECK(child_names("train.amp") == std::vector<std::string>{"enabled", "dtype"});
  const auto top = child_names("");
  CHECK(std::find(top.begin(), top.end(), "distributed") != top.end());
  CHECK(std::find(top.begin(), top.end(), "seed") != top.end());
}

TEST_CASE("field_table: synonyms lead a did-you-mean hint to the real name") {
  const auto candidates = suggestion_candidates("optim");
  CHECK(std::find(candidates.begin(), candidates.end(), "learning_rate") != candidates.end());
  CHECK(suggestion_for("optim", "learning_rate") == "lr");
  CHECK(suggestion_for("optim", "momentum") == "momentum");
}

TEST_CASE("field_table: the issue's documented hashing decisions hold") {
  for (const char* excluded :
       {"name", "description", "tags", "metrics.log_every", "distributed.timeout_s", "regression.samples_per_sec",
        "regression.final_train_loss", "regression.eval_accuracy"}) {
    INFO(excluded);
    CHECK(find_field(excluded)->hashing == Hashing::excluded);
  }
  CHECK(find_field("env")->hashing == Hashing::profile_content);
  for (const Field& field : fields()) {
    if (field.path.rfind("regression.", 0) == 0) {
      CHECK(field.hashing == Hashing::excluded);
    }
  }
}

TEST_CASE("field_table: docs/spec.md carries exactly the generated table") {
  std::ifstream in(expctl::test::source_dir() / "docs" / "spec.md");
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string docs = buffer.str();
  const size_t begin = docs.find(k_table_begin);
  const size_t end = docs.find(k_table_end);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string in_docs = docs.substr(begin, end + k_table_end.size() + 1 - begin);
  INFO("docs/spec.md is out of date: replace the table with the output of `expctl validate --print-field-table`");
  CHECK(in_docs == render_field_table_markdown());
}

TEST_CASE("field_table: the rendered table has one row per field and escapes pipes") {
  const std::string table = render_field_table_markdown();
  size_t rows = 0;
  for (size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1)) {
    ++rows;
  }
  CHECK(rows == fields().size());
  CHECK_THAT(table, Catch::Contains("| `distributed.backend` | choice | `auto` | `auto`, `gloo`, `nccl` | yes |"));
  CHECK_THAT(table, Catch::Contains("| `env` | string | `\"\"` |  | content |"));
}
