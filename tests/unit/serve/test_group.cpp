// The dashboard's documents about several runs (api/group.hpp): a group's band over seeds, the
// runs of one configuration but the seed, the spec fields that differ, and a zoomed series.
#include <algorithm>
#include <cmath>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/api/dashboard.hpp"
#include "expctl/api/group.hpp"

using namespace expctl;

namespace {

/// Records a spec with `values` as its hashed fields and returns its hash.
std::string put_values(store::Store& db, const nlohmann::json& values) {
  const std::string canonical = nlohmann::json{{"format", "expctl-spec-v1"}, {"name", "g"}, {"spec", values}}.dump();
  const std::string hash = util::sha256_hex(canonical);
  db.put_spec(hash, canonical, "g");
  return hash;
}

store::RunRecord run_of(store::Store& db, const nlohmann::json& values, const std::string& name) {
  return db.create_run({put_values(db, values), std::nullopt, name, std::nullopt});
}

nlohmann::json values_with(int seed, double lr) {
  return {{"name", "g"}, {"seed", seed}, {"optim", {{"lr", lr}, {"name", "sgd"}}}};
}

}  // namespace

TEST_CASE("band_document gives the members' mean and compare's t interval per step", "[serve]") {
  test::StoreFixture fixture;
  std::vector<store::RunRecord> runs;
  // Three members: at step s member m holds s + m (m = 0, 1, 2), so the mean is s + 1 and the
  // standard deviation 1; rank 1 of each holds 100 and is never read.
  for (int m = 0; m < 3; ++m) {
    runs.push_back(run_of(fixture.db, values_with(m + 1, 0.1), "seed-" + std::to_string(m)));
    std::vector<store::MetricPoint> points;
    for (int step = 1; step <= 10; ++step) {
      points.push_back({0, step, "loss", static_cast<double>(step + m)});
      points.push_back({1, step, "loss", 100.0});
    }
    fixture.db.append_metrics(runs.back().id, points);
  }
  api::BandQuery query;
  query.runs = runs;
  auto band = api::band_document(fixture.db, query);
  CHECK(band["kind"] == "band");
  REQUIRE(band["x"].size() == 10);
  CHECK_FALSE(band["downsampled"].get<bool>());
  CHECK(band["members"].size() == 3);
  CHECK(band["members"][1]["seed"] == 2);
  // t(0.975, 2 df) = 4.302652729911275; the half width is t · 1 / sqrt(3).
  const double half = 4.302652729911275 / std::sqrt(3.0);
  for (std::size_t i = 0; i < 10; ++i) {
    const double step = static_cast<double>(i + 1);
    CHECK(band["x"][i] == i + 1);
    CHECK(band["n"][i] == 3);
    CHECK(band["mean"][i].get<double>() == Approx(step + 1));
    CHECK(band["low"][i].get<double>() == Approx(step + 1 - half).epsilon(1e-9));
    CHECK(band["high"][i].get<double>() == Approx(step + 1 + half).epsilon(1e-9));
  }

  SECTION("more steps than points: buckets of consecutive steps, each member's mean in it") {
    query.points = 5;
    band = api::band_document(fixture.db, query);
    CHECK(band["downsampled"].get<bool>());
    REQUIRE(band["x"].size() == 5);
    CHECK(band["x"] == nlohmann::json::parse("[2, 4, 6, 8, 10]"));
    CHECK(band["mean"][0].get<double>() == Approx(2.5));  // steps 1 and 2: members 1.5, 2.5, 3.5
  }
  SECTION("a step range, and one member: its values with no band") {
    query.from_step = 4;
    query.to_step = 6;
    band = api::band_document(fixture.db, query);
    CHECK(band["x"] == nlohmann::json::parse("[4, 5, 6]"));
    query.runs.resize(1);
    band = api::band_document(fixture.db, query);
    CHECK(band["mean"] == nlohmann::json::parse("[4.0, 5.0, 6.0]"));
    CHECK(band["low"] == nlohmann::json::parse("[null, null, null]"));
  }
  SECTION("a member without the series adds nothing to a step's count") {
    query.runs.push_back(fixture.new_run("no loss"));
    band = api::band_document(fixture.db, query);
    CHECK(band["n"][0] == 3);
    CHECK(band["members"][3]["points"] == 0);
  }
}

TEST_CASE("seed_group finds the runs of one spec but the seed", "[serve]") {
  test::StoreFixture fixture;
  const auto a1 = run_of(fixture.db, values_with(1, 0.1), "a1");
  const auto a2 = run_of(fixture.db, values_with(2, 0.1), "a2");
  const auto a2_again = run_of(fixture.db, values_with(2, 0.1), "a2 again");  // same spec hash
  const auto other_lr = run_of(fixture.db, values_with(1, 0.2), "b1");
  const auto unseeded = run_of(fixture.db, {{"name", "g"}, {"optim", {{"lr", 0.1}, {"name", "sgd"}}}}, "no seed");
  std::vector<std::string> ids;
  for (const auto& run : api::seed_group(fixture.db, a1)) {
    ids.push_back(run.name);
  }
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"a1", "a2", "a2 again", "no seed"});
  CHECK(api::seed_group(fixture.db, other_lr).size() == 1);
  // A run whose spec is not stored is a group of its own.
  CHECK(api::seed_group(fixture.db, fixture.new_run("unknown spec")).size() == 1);
  (void)a2;
  (void)a2_again;
  (void)unseeded;
}

TEST_CASE("spec_diff_document lists only the fields that differ", "[serve]") {
  test::StoreFixture fixture;
  const auto a = run_of(fixture.db, values_with(1, 0.1), "a");
  const auto b = run_of(fixture.db, values_with(2, 0.1), "b");
  const auto c =
      run_of(fixture.db, {{"name", "g"}, {"seed", 1}, {"optim", {{"lr", 0.3}, {"name", "sgd"}}}, {"extra", true}}, "c");
  fixture.db.set_summary(a.id, R"({"final_train_loss": 0.5, "note": "text"})");
  const auto runs = std::vector<store::RunRecord>{*fixture.db.run(a.id), *fixture.db.run(b.id), *fixture.db.run(c.id)};
  const auto doc = api::spec_diff_document(fixture.db, runs);
  CHECK(doc["kind"] == "spec-diff");
  REQUIRE(doc["runs"].size() == 3);
  CHECK_FALSE(doc["runs"][0].contains("run_dir"));
  CHECK(doc["runs"][1]["seed"] == 2);
  std::vector<std::string> paths;
  for (const auto& field : doc["fields"]) {
    paths.push_back(field["path"]);
  }
  CHECK(paths == std::vector<std::string>{"optim.lr", "seed", "extra"});
  CHECK(doc["fields"][0]["values"] == nlohmann::json::parse("[0.1, 0.1, 0.3]"));
  CHECK(doc["fields"][2]["values"] == nlohmann::json::parse("[null, null, true]"));
  CHECK(doc["same"] == 2);              // name, optim.name
  REQUIRE(doc["metrics"].size() == 1);  // numbers only
  CHECK(doc["metrics"][0]["values"] == nlohmann::json::parse("[0.5, null, null]"));
}

TEST_CASE("series_document of a step range: full resolution where it fits", "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  std::vector<store::MetricPoint> points;
  for (int step = 1; step <= 3000; ++step) {
    points.push_back({0, step, "loss", step == 1234 ? 50.0 : 1.0});
  }
  fixture.db.append_metrics(run.id, points);
  api::SeriesQuery query;
  query.run_id = run.id;
  query.metric = "loss";
  query.points = 300;
  auto series = api::series_document(fixture.db, query);
  CHECK(series["ranks"][0]["downsampled"].get<bool>());
  query.from_step = 1201;
  query.to_step = 1300;
  series = api::series_document(fixture.db, query);
  const auto& rank = series["ranks"][0];
  CHECK_FALSE(rank["downsampled"].get<bool>());
  CHECK(rank["points"] == 100);
  CHECK(rank["x"].front() == 1201);
  CHECK(rank["x"].back() == 1300);
  CHECK(rank["y"][1234 - 1201] == 50.0);
}
