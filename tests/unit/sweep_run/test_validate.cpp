// `expctl validate`'s check of one file (sweep_run/validate.hpp): a spec or a sweep, valid or with
// every problem, and its entry of the JSON document.

#include "sweep_test_helpers.hpp"
#include <catch2/catch.hpp>

#include "expctl/sweep_run/validate.hpp"

using namespace expctl;
using test::sweep_test::data;

TEST_CASE("validate: a valid spec and a valid sweep, each with its hash and its entry") {
  const sweep_run::FileCheck spec = sweep_run::check_file(data("base.yaml"), {"optim.lr=0.1"});
  REQUIRE(spec.valid());
  CHECK_FALSE(spec.is_sweep);
  const nlohmann::json entry = sweep_run::check_json(spec);
  CHECK(entry.at("hash") == spec.spec->hash());
  CHECK(entry.at("values").at("optim").at("lr") == 0.1);
  CHECK(entry.at("errors").empty());

  const sweep_run::FileCheck grid = sweep_run::check_file(data("grid.yaml"), {});
  REQUIRE(grid.valid());
  CHECK(sweep_run::check_json(grid).at("kind") == "sweep");
  CHECK(sweep_run::check_json(grid).at("points").size() == 8);
}

TEST_CASE("validate: --set on a sweep is one problem of the file, and its entry has no points") {
  const sweep_run::FileCheck check = sweep_run::check_file(data("grid.yaml"), {"optim.lr=0.1"});
  CHECK_FALSE(check.valid());
  REQUIRE(check.errors.size() == 1);
  CHECK_THAT(check.report, Catch::Contains("--set applies to specs"));
  const nlohmann::json entry = sweep_run::check_json(check);
  CHECK(entry.at("valid") == false);
  CHECK(entry.at("points").is_null());
  CHECK_FALSE(entry.contains("values"));
}

TEST_CASE("validate: a spec with a bad override is an input error with a position") {
  const sweep_run::FileCheck check = sweep_run::check_file(data("base.yaml"), {"train.max_step=3"});
  CHECK_FALSE(check.valid());
  CHECK_FALSE(check.errors.empty());
  CHECK(check.positioned);
  CHECK(sweep_run::check_json(check).at("values").is_null());
}
