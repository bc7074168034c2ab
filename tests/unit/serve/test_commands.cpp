// The api operations whose results CLI commands print: the run `watch` follows, the runs `gc`
// collects, and `show`'s hyperparameter rows.
#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/api/cleanup.hpp"
#include "expctl/api/show.hpp"
#include "expctl/api/watch.hpp"
#include "expctl/util/error.hpp"

using namespace expctl;

TEST_CASE("watched_run: without a selector the running run, and an empty store is an input error") {
  test::StoreFixture fixture;
  CHECK_THROWS_AS(api::watched_run(fixture.db, ""), util::UsageError);
  const auto running = fixture.new_run("first");
  const auto done = fixture.new_run("second");
  fixture.db.finish_run(done.id, store::RunStatus::completed, 0, "");
  CHECK(api::watched_run(fixture.db, "") == running.id);
  CHECK(api::watched_run(fixture.db, done.id) == done.id);
}

TEST_CASE("collect_garbage: runs of a status go unless a baseline or kept, and a dry run removes nothing") {
  test::StoreFixture fixture;
  const auto failed = fixture.new_run();
  const auto baseline = fixture.new_run();
  const auto kept = fixture.new_run();
  const auto completed = fixture.new_run();
  for (const auto* run : {&failed, &baseline, &kept}) {
    fixture.db.finish_run(run->id, store::RunStatus::failed, 1, "boom");
  }
  fixture.db.finish_run(completed.id, store::RunStatus::completed, 0, "");
  fixture.db.add_tag(baseline.id, "baseline:quickstart");
  fixture.db.add_tag(kept.id, "night:2026-12-01");
  api::GcRequest request{
      .statuses = {store::RunStatus::failed}, .keep_tags = {"night:*"}, .include_tagged = true, .dry_run = true};
  const auto would = api::collect_garbage(fixture.db, request);
  REQUIRE(would.size() == 1);
  CHECK(would[0].kind == "run");
  CHECK(would[0].what == failed.id);
  CHECK(fixture.db.list_runs().size() == 4);

  request.dry_run = false;
  CHECK(api::collect_garbage(fixture.db, request).size() == 1);
  CHECK(fixture.db.list_runs().size() == 3);
  CHECK(api::collect_garbage(fixture.db, api::GcRequest{}).empty());  // neither age nor status: no run
}

TEST_CASE("hyperparameter_rows: a section's rows together, in the field table's order, defaults marked") {
  api::RunDetails details;
  details.values = {{"name", "mlp"}, {"seed", 0}, {"container", {{"image", ""}}}, {"optim", {{"lr", 0.5}}}};
  std::vector<std::string> rows;
  for (const auto& row : api::hyperparameter_rows(details)) {
    rows.push_back(row.section + " " + row.key + (row.is_default ? " default" : ""));
  }
  CHECK(rows ==
        std::vector<std::string>{"general name", "general seed default", "container image default", "optim lr"});
}
