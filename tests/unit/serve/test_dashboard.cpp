// The documents only the server answers (api/dashboard.hpp) and the run-folder rule it reads by.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "store_fixture.hpp"
#include <catch2/catch.hpp>

#include "expctl/api/dashboard.hpp"
#include "expctl/api/runs.hpp"
#include "expctl/api/sweep.hpp"
#include "expctl/api/watch.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/sweep/report.hpp"

using namespace expctl;

namespace {

void add_series(store::Store& db, const std::string& run, const std::string& name, int ranks, int steps,
                double value = 1.0) {
  std::vector<store::MetricPoint> points;
  for (int rank = 0; rank < ranks; ++rank) {
    for (int step = 1; step <= steps; ++step) {
      points.push_back({rank, step, name, value});
    }
  }
  db.append_metrics(run, points);
}

}  // namespace

TEST_CASE("runs_page filters by status, tag, name and spec prefix, sorts and pages", "[serve]") {
  test::StoreFixture fixture;
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    const auto run = fixture.new_run(i % 2 == 0 ? "even-" + std::to_string(i) : "odd-" + std::to_string(i));
    ids.push_back(run.id);
    if (i % 3 == 0) {
      fixture.db.add_tag(run.id, "third");
    }
    if (i < 5) {
      fixture.db.finish_run(run.id, i == 4 ? store::RunStatus::failed : store::RunStatus::completed, 0, "");
    }
  }
  api::RunsQuery query;
  auto page = api::runs_page(fixture.db, query);
  CHECK(page["kind"] == "runs-page");
  CHECK(page["total"] == 7);
  CHECK(page["runs"].size() == 7);
  CHECK_FALSE(page["runs"][0].contains("run_dir"));  // no server path in a page

  query.status = store::RunStatus::running;
  CHECK(api::runs_page(fixture.db, query)["total"] == 2);
  query.status.reset();
  query.tag = "third";
  CHECK(api::runs_page(fixture.db, query)["total"] == 3);
  query.tag.clear();
  query.name = "odd";
  CHECK(api::runs_page(fixture.db, query)["total"] == 3);
  query.name.clear();
  query.spec_prefix = fixture.spec_hash.substr(0, 6);
  CHECK(api::runs_page(fixture.db, query)["total"] == 7);
  query.spec_prefix = "000000";
  CHECK(api::runs_page(fixture.db, query)["total"] == 0);
  query.spec_prefix.clear();

  query.sort = api::RunsSort::name;
  query.descending = false;
  query.limit = 3;
  page = api::runs_page(fixture.db, query);
  REQUIRE(page["runs"].size() == 3);
  CHECK(page["runs"][0]["name"] == "even-0");
  CHECK(page["runs"][2]["name"] == "even-4");
  query.offset = 6;
  page = api::runs_page(fixture.db, query);
  CHECK(page["runs"].size() == 1);
  CHECK(page["runs"][0]["name"] == "odd-5");
  query.offset = 100;
  CHECK(api::runs_page(fixture.db, query)["runs"].empty());
  query.limit = 100000;
  query.offset = 0;
  CHECK(api::runs_page(fixture.db, query)["limit"] == api::k_max_page_rows);
}

TEST_CASE("runs_page adds metric columns: last of rank 0, min or max over ranks, several at once", "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  fixture.db.append_metrics(run.id, std::vector<store::MetricPoint>{{0, 1, "loss", 3.0}, {0, 2, "loss", 1.0},
                                                                    {1, 1, "loss", 0.5}, {1, 2, "loss", 4.0}});
  api::RunsQuery query;
  query.columns = {{"loss", api::Aggregate::last},
                   {"loss", api::Aggregate::min},
                   {"loss", api::Aggregate::max},
                   {"no-such-metric", api::Aggregate::max}};
  const auto page = api::runs_page(fixture.db, query);
  CHECK(page["columns"][1] == nlohmann::json({{"metric", "loss"}, {"agg", "min"}}));
  CHECK(page["runs"][0]["metrics"] == nlohmann::json::parse("[1.0, 0.5, 4.0, null]"));
  query.columns.clear();
  CHECK_FALSE(api::runs_page(fixture.db, query)["runs"][0].contains("metrics"));
  // More than k_max_metric_columns: the first eight are computed.
  query.columns.assign(12, {"loss", api::Aggregate::min});
  CHECK(api::runs_page(fixture.db, query)["runs"][0]["metrics"].size() == api::k_max_metric_columns);
}

TEST_CASE("downsampling keeps each bucket's min, max and last, so a one-step spike survives", "[serve]") {
  std::vector<std::int64_t> steps;
  std::vector<double> values;
  for (int i = 0; i < 100000; ++i) {
    steps.push_back(i + 1);
    values.push_back(i == 54321 ? 1000.0 : (i == 777 ? -5.0 : std::sin(i * 0.001)));
  }
  std::vector<std::size_t> kept;
  api::downsample(steps, values, 900, kept);
  CHECK(kept.size() <= 900);
  CHECK(kept.size() >= 600);
  CHECK(std::find(kept.begin(), kept.end(), 54321U) != kept.end());
  CHECK(std::find(kept.begin(), kept.end(), 777U) != kept.end());
  CHECK(kept.back() == steps.size() - 1);
  CHECK(std::is_sorted(kept.begin(), kept.end()));
  CHECK(std::adjacent_find(kept.begin(), kept.end()) == kept.end());

  api::downsample({1, 2, 3}, {1.0, 2.0, 3.0}, 10, kept);
  CHECK(kept == std::vector<std::size_t>{0, 1, 2});  // exact when it fits
  // NaN is never chosen as a bucket's min or max while the bucket has a number.
  api::downsample({1, 2, 3, 4, 5, 6}, {NAN, 5.0, NAN, 1.0, NAN, NAN}, 3, kept);
  CHECK(kept == std::vector<std::size_t>{1, 3, 5});
}

TEST_CASE("series_document sends exact points when they fit and only new steps after seq", "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  add_series(fixture.db, run.id, "loss", 2, 50, 2.0);
  add_series(fixture.db, run.id, "step_time_ms", 2, 50, 10.0);
  api::SeriesQuery query;
  query.run_id = run.id;
  query.metric = "loss";
  auto series = api::series_document(fixture.db, query);
  CHECK(series["seq"] == 50);
  REQUIRE(series["ranks"].size() == 2);
  CHECK(series["ranks"][1]["x"].size() == 50);
  CHECK(series["ranks"][1]["downsampled"] == false);
  CHECK(series["ranks"][0]["y"][0] == 2.0);

  query.after_step = 45;
  series = api::series_document(fixture.db, query);
  CHECK(series["ranks"][0]["x"] == nlohmann::json({46, 47, 48, 49, 50}));
  CHECK(series["seq"] == 50);
  query.after_step = 50;
  series = api::series_document(fixture.db, query);
  CHECK(series["ranks"].empty());
  CHECK(series["seq"] == 50);  // nothing new: the page keeps its sequence number

  // Wall time is the sum of step times through each step, also after a sequence number.
  query.x = api::XAxis::wall;
  query.after_step = 45;
  series = api::series_document(fixture.db, query);
  CHECK(series["ranks"][0]["x"][0] == Approx(0.46));
  query.after_step.reset();
  series = api::series_document(fixture.db, query);
  CHECK(series["ranks"][0]["x"][0] == Approx(0.01));
  CHECK(series["ranks"][0]["x"][49] == Approx(0.5));

  query.x = api::XAxis::step;
  query.points = 12;
  series = api::series_document(fixture.db, query);
  CHECK(series["ranks"][0]["downsampled"] == true);
  CHECK(series["ranks"][0]["points"] == 50);
  CHECK(series["ranks"][0]["x"].size() <= 12);

  query.points = 1000;
  const std::string csv = api::series_csv(api::series_document(fixture.db, query));
  CHECK(csv.starts_with("rank,step,loss\n0,1,2.0\n"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 101);
}

TEST_CASE("series_document charts a long series from its chunk headers and a zoomed range at full resolution",
          "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  constexpr int k_steps = 40'000;  // 10 sealed chunks a rank (9 of 4 096 points, and 3 136)
  const auto value_at = [](int step, int rank) {
    return step == 30'000 && rank == 0   ? 50.0
           : step == 20'000 && rank == 1 ? -3.0
                                         : (step % 32) / 32.0 + rank;  // 6 digits: sent exactly
  };
  std::vector<store::MetricPoint> points;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 1; step <= k_steps; ++step) {
      points.push_back({rank, step, "loss", value_at(step, rank)});
    }
  }
  fixture.db.append_metrics(run.id, points);
  fixture.db.finish_run(run.id, store::RunStatus::completed, 0, "");
  // The third chunk of each rank (steps 8 193-12 288) is damaged: a point reader fails on it.
  store::testing::execute_sql(fixture.db_path, "UPDATE metric_chunks SET data = x'01' WHERE first_step = 8193");
  api::SeriesQuery query;
  query.run_id = run.id;
  query.metric = "loss";
  query.points = 5000;  // buckets of 24 points: read point by point
  CHECK_THROWS_WITH(api::series_document(fixture.db, query), Catch::Contains("metric chunk is damaged"));

  query.points = 9;  // 3 buckets of 13 334 points: from the headers, no point decoded
  auto series = api::series_document(fixture.db, query);
  CHECK(series["seq"] == k_steps);
  REQUIRE(series["ranks"].size() == 2);
  for (const auto& rank : series["ranks"]) {
    CHECK(rank["points"] == k_steps);
    CHECK(rank["downsampled"] == true);
    const auto xs = rank["x"].get<std::vector<std::int64_t>>();
    CHECK(xs.size() <= 9);
    CHECK(xs.size() >= 4);
    CHECK(std::adjacent_find(xs.begin(), xs.end(), std::greater_equal<>()) == xs.end());  // strictly ascending
    CHECK(xs.front() == 1);
    CHECK(xs.back() == k_steps);
    CHECK(rank["y"].back() == value_at(k_steps, rank["rank"].get<int>()));
  }
  const auto ys = [&](int rank) { return series["ranks"][rank]["y"].get<std::vector<double>>(); };
  CHECK(std::ranges::max(ys(0)) == 50.0);  // rank 0's spike and rank 1's dip are drawn
  CHECK(std::ranges::min(ys(1)) == -3.0);

  // Zoomed in: the exact points of the range, read from the chunks that hold it.
  query.from_step = 20'001;
  query.to_step = 20'100;
  query.points = 1000;
  series = api::series_document(fixture.db, query);
  REQUIRE(series["ranks"].size() == 2);
  CHECK(series["ranks"][1]["downsampled"] == false);
  CHECK(series["ranks"][1]["points"] == 100);
  REQUIRE(series["ranks"][1]["x"].size() == 100);
  for (int i = 0; i < 100; ++i) {
    CHECK(series["ranks"][1]["x"][i] == 20'001 + i);
    CHECK(series["ranks"][1]["y"][i] == value_at(20'001 + i, 1));
  }
  // A range still far longer than the chart: the chunks it cuts are read point by point, the
  // rest from their headers.
  query.from_step = 20'050;
  query.to_step = 30'000;
  query.points = 6;
  series = api::series_document(fixture.db, query);
  REQUIRE(series["ranks"].size() == 2);
  CHECK(series["ranks"][0]["points"] == 9'951);
  CHECK(series["ranks"][0]["x"].front() == 20'050);
  CHECK(series["ranks"][0]["x"].back() == 30'000);
  CHECK(series["ranks"][0]["y"].back() == 50.0);
  CHECK(series["seq"] == 30'000);
}

TEST_CASE("the server reads a run folder only under the store's runs root", "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  test::TempDir outside;
  std::filesystem::create_directories(outside / "logs");
  outside.write("logs/rank-0.log", "secret outside the store\n");
  outside.write("resolved.json", R"({"spec": {"train": {"max_steps": 77}}, "launch": {}})");
  // The run's folder is a link to a folder elsewhere (a crafted or moved store).
  std::filesystem::remove_all(run.run_dir);
  std::filesystem::create_directories(run.run_dir.parent_path());
  std::filesystem::create_directory_symlink(outside.path(), run.run_dir);

  const api::FolderAccess server{api::FolderPolicy::under_runs_root};
  const api::FolderAccess cli{};
  CHECK_FALSE(api::log_tail(fixture.db, run, 0, 1000, server));
  CHECK(api::log_tail(fixture.db, run, 0, 1000, cli) == "secret outside the store\n");
  CHECK(api::resolved_spec(fixture.db, run, server).is_null());
  CHECK(api::watch_view(fixture.db, run.id, server).total_steps == std::nullopt);
  CHECK(api::watch_view(fixture.db, run.id, cli).total_steps == 77);
  CHECK_FALSE(api::read_details(fixture.db, run.id, "serve", server).every_field);

  // Inside the runs root it is read, and only the tail of a long log.
  std::filesystem::remove(run.run_dir);
  std::filesystem::create_directories(run.run_dir / "logs");
  std::ofstream(run.run_dir / "logs" / "rank-1.log") << std::string(5000, 'x') << "end\n";
  const auto tail = api::log_tail(fixture.db, run, 1, 100, server);
  REQUIRE(tail);
  CHECK(tail->size() == 100);
  CHECK(tail->ends_with("end\n"));
  CHECK_FALSE(api::log_tail(fixture.db, run, -1, 100, server));
  CHECK_FALSE(api::log_tail(fixture.db, run, 7, 100, server));
}

TEST_CASE("phase_shares_document: each bucket's phase shares of one rank's step time, untimed phases null", "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  std::vector<store::MetricPoint> points;
  for (std::int64_t step = 1; step <= 10; ++step) {
    points.push_back({0, step, "step_time_ms", step <= 6 ? 10.0 : 20.0});
    points.push_back({0, step, "data_wait_ms", 1.0});
    points.push_back({0, step, "forward_ms", 3.0});
    points.push_back({0, step, "backward_ms", 4.0});
    points.push_back({0, step, "comm_wait_ms", step <= 6 ? 1.0 : 11.0});
  }
  fixture.db.append_metrics(run.id, points);
  api::PhaseSharesQuery query;
  query.run_id = run.id;
  query.buckets = 5;
  auto doc = api::phase_shares_document(fixture.db, query);
  CHECK(doc["kind"] == "phase-shares");
  CHECK(doc["ranks"] == nlohmann::json::parse("[0]"));
  CHECK(doc["steps"] == 10);
  CHECK(doc["measured"] == true);
  CHECK(doc["at"] == nlohmann::json::parse("[2, 4, 6, 8, 10]"));
  CHECK(doc["phases"]["data"] == nlohmann::json::parse("[0.1, 0.1, 0.1, 0.05, 0.05]"));
  CHECK(doc["phases"]["comm"] == nlohmann::json::parse("[0.1, 0.1, 0.1, 0.55, 0.55]"));
  CHECK(doc["phases"]["optimizer"].is_null());  // never timed: not 0 %
  CHECK(doc["phases"]["other"].is_null());      // unknown while a phase is untimed

  std::vector<store::MetricPoint> optimizer;
  for (std::int64_t step = 1; step <= 10; ++step) optimizer.push_back({0, step, "optimizer_ms", 0.5});
  fixture.db.append_metrics(run.id, optimizer);
  query.buckets = 1;
  doc = api::phase_shares_document(fixture.db, query);
  CHECK(doc["at"] == nlohmann::json::parse("[10]"));
  // 140 ms of steps: data 10, forward 30, backward 40, comm 6 + 44, optimizer 5; other 5.
  CHECK(doc["phases"]["optimizer"][0].get<double>() == Approx(5.0 / 140.0));
  CHECK(doc["phases"]["other"][0].get<double>() == Approx(5.0 / 140.0));
  query.x = api::XAxis::wall;
  CHECK(api::phase_shares_document(fixture.db, query)["at"] == nlohmann::json::parse("[0.14]"));

  query.rank = 1;  // a rank that stored nothing
  doc = api::phase_shares_document(fixture.db, query);
  CHECK(doc["steps"] == 0);
  CHECK(doc["at"].empty());
  CHECK(doc["phases"]["data"].is_null());
  CHECK(doc["measured"] == false);
}

TEST_CASE("phase_shares_document: a rank with step times but no phase timed (a program's) has nothing to chart",
          "[serve]") {
  test::StoreFixture fixture;
  const auto run = fixture.new_run();
  std::vector<store::MetricPoint> points;
  for (std::int64_t step = 1; step <= 4; ++step) {
    points.push_back({0, step, "step_time_ms", 10.0});
    points.push_back({0, step, "loss", 1.0});
  }
  fixture.db.append_metrics(run.id, points);
  api::PhaseSharesQuery query;
  query.run_id = run.id;
  const auto doc = api::phase_shares_document(fixture.db, query);
  CHECK(doc["steps"] == 4);
  CHECK(doc["measured"] == false);  // the page hides the chart instead of drawing it empty
  for (const char* phase : {"data", "forward", "backward", "comm", "optimizer", "other"}) {
    CHECK(doc["phases"][phase].is_null());
  }
}

TEST_CASE("sweep_document: the report `expctl sweep --report` makes, with its table and notes as text", "[serve]") {
  test::StoreFixture fixture;
  const auto file = fixture.dir.write("sweep.yaml", std::string("base: ") + EXPCTL_SWEEP_BASE +
                                                        "\nname: lr\ngrid:\n  optim.lr: [0.01, 0.1]\nseeds: 2\n");
  const sweep::Sweep sweep = sweep::load_sweep(file);
  REQUIRE(sweep.points.size() == 4);
  // Points 0-2 completed (0 and 1: lr 0.01, seeds 7 and 8), point 3 none.
  const double losses[] = {0.5, 0.7, 0.3};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& spec = sweep.points[i].spec;
    fixture.db.put_spec(spec.hash(), spec.canonical(), "lr");
    const auto run = fixture.db.create_run({spec.hash(), std::nullopt, "lr", std::nullopt});
    fixture.db.set_summary(run.id, nlohmann::json{{"final_train_loss", losses[i]}}.dump());
    fixture.db.finish_run(run.id, store::RunStatus::completed, 0, "");
  }
  const auto doc = api::sweep_document(fixture.db, sweep);
  CHECK(doc["kind"] == "sweep-report");
  CHECK_FALSE(doc["sweep"].contains("file"));  // no server path in a page
  CHECK(doc["axes"] == nlohmann::json::parse(R"(["optim.lr"])"));
  CHECK(doc["numeric_axes"] == nlohmann::json::parse(R"(["optim.lr"])"));
  CHECK(doc["metrics"] == nlohmann::json::parse(R"(["final_train_loss"])"));
  REQUIRE(doc["configurations"].size() == 2);
  CHECK(doc["configurations"][0]["metrics"]["final_train_loss"]["median"] == Approx(0.6));
  CHECK(doc["table"]["header"][0] == "optim.lr");
  REQUIRE(doc["table"]["rows"].size() == 2);
  // The same text the CLI's table holds.
  const auto report = sweep::build_report(sweep, sweep::completed_runs(sweep, fixture.db), {});
  CHECK(sweep::render(report, "text").find(doc["table"]["rows"][0][0].get<std::string>()) != std::string::npos);
  CHECK(doc["title"].get<std::string>().find("3 of 4 runs") != std::string::npos);
  CHECK_FALSE(doc["notes"].empty());
  CHECK(api::sweeps_list({std::make_shared<const sweep::Sweep>(sweep)})["sweeps"][0]["points"] == 4);
}
