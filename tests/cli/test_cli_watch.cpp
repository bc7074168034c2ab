// `expctl watch`: a live view of a run's ranks from another process, read-only.
#include <sstream>

#include <catch2/catch.hpp>

#include "run_helpers.hpp"

namespace expctl::test::cli {
namespace {

std::vector<json> json_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    lines.push_back(json::parse(line));
  }
  return lines;
}

}  // namespace

TEST_CASE("watch: a finished run shows every rank once and ends by itself") {
  RunDir dir;
  REQUIRE(dir.expctl({"run", tiny_spec()}).exit_code == 0);
  const auto watched = dir.expctl({"watch"});
  INFO(watched.out << watched.err);
  CHECK(watched.exit_code == 0);
  CHECK_THAT(watched.out, Catch::Contains("completed  step 60/60"));
  CHECK_THAT(watched.out, Catch::Contains("rank  status") && Catch::Contains("straggler") &&
                              Catch::Contains("bwd") && Catch::Contains("comm"));
  CHECK_THAT(watched.out, Catch::Contains("\n0     completed  ") && Catch::Contains("\n1     completed  "));
  CHECK_THAT(watched.out, Catch::EndsWith("ended: completed\n"));
  // Once each: one table, one row per rank, and no third rank.
  const auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (auto at = watched.out.find(text); at != std::string::npos; at = watched.out.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  CHECK(count("rank  status") == 1);
  CHECK(count("\n0     completed  ") == 1);
  CHECK(count("\n1     completed  ") == 1);
  CHECK(count("\n2     ") == 0);
}

TEST_CASE("watch: --format json streams both ranks of a live run and ends with the run") {
  RunDir dir;
  Background run(dir.argv({"run", tiny_spec(), "--set", "train.max_steps=4000", "--set", "train.eval_every=0"}),
                 dir.dir / "run");
  std::optional<store::RunRecord> record;
  REQUIRE(eventually([&] { return (record = dir.only_run()).has_value(); }));
  REQUIRE(eventually([&] { return dir.open().metrics(record->id, {.name = "loss", .rank = 1}).size() >= 20; }));
  Background watch(dir.argv({"watch", record->id, "--format", "json", "--interval", "0.2"}), dir.dir / "watch");
  REQUIRE(run.wait() == 0);
  REQUIRE(watch.wait(std::chrono::seconds(30)) == 0);  // ended by itself
  const auto lines = json_lines(watch.out());
  REQUIRE(lines.size() >= 2);
  CHECK(lines.front().at("ended") == false);
  CHECK(lines.front().at("run").at("status") == "running");
  CHECK(lines.back().at("ended") == true);
  CHECK(lines.back().at("run").at("status") == "completed");
  std::int64_t previous = 0;
  for (const json& line : lines) {
    REQUIRE(line.at("ranks").size() == 2);
    const std::int64_t step = line.at("ranks")[0].at("step").get<std::int64_t>();
    CHECK(step >= previous);
    previous = step;
  }
  CHECK(previous == 4000);
  for (const json& rank : lines.front().at("ranks")) {
    CAPTURE(rank.dump());
    CHECK(rank.at("step").get<std::int64_t>() >= 20);
    const json& shares = rank.at("phase_shares");
    double covered = 0.0;
    for (const char* phase : {"data", "forward", "backward", "comm", "optimizer"}) {
      CHECK(shares.at(phase).get<double>() >= 0.0);
      covered += shares.at(phase).get<double>();
    }
    CHECK(covered <= 1.0 + 1e-9);
    CHECK(covered > 0.3);
    CHECK(rank.at("straggler_score").get<double>() > 0.0);
  }
}

TEST_CASE("watch: an empty store is an input error that says how to start a run") {
  RunDir dir;
  REQUIRE(dir.expctl({"list"}).exit_code == 0);  // creates nothing
  REQUIRE(dir.expctl({"validate", tiny_spec()}).exit_code == 0);
  fs::create_directories(dir.db.parent_path());
  store::Store::open(dir.db);  // an empty store
  const auto watched = dir.expctl({"watch"});
  CHECK(watched.exit_code == 2);
  CHECK_THAT(watched.err, Catch::Contains("holds no run yet: start one with expctl run SPEC"));
  const auto unknown = dir.expctl({"watch", "nosuchrun"});
  CHECK(unknown.exit_code == 2);
}

}  // namespace expctl::test::cli
