// The metrics protocol of user programs (run/program_protocol.hpp) and the points a logged step
// becomes (run/program.hpp): pure functions, checked line by line.
#include <cmath>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/program.hpp"
#include "expctl/run/program_gather.hpp"
#include "expctl/run/program_protocol.hpp"

using namespace expctl::run;

namespace {

double value_of(const ProgramLine& line, const std::string& name) {
  for (const auto& [key, value] : line.values) {
    if (key == name) {
      return value;
    }
  }
  FAIL("no value " << name);
  return 0.0;
}

}  // namespace

TEST_CASE("program protocol: a step line with numbers, bools, time, and fields that are ignored") {
  const auto line = decode_program_line(
      R"({"step": 12, "loss": 0.53, "samples": 64, "time": 1764900000.25, "ok": true, "tag": "x", "list": [1]})");
  REQUIRE(line.has_value());
  CHECK(line->kind == ProgramLine::Kind::step);
  CHECK(line->step == 12);
  CHECK(line->time == 1764900000.25);
  CHECK(line->values.size() == 3);
  CHECK(value_of(*line, "loss") == 0.53);
  CHECK(value_of(*line, "samples") == 64);
  CHECK(value_of(*line, "ok") == 1.0);
}

TEST_CASE("program protocol: Python's NaN and Infinity are values, also beside strings that contain them") {
  const auto line = decode_program_line(R"({"step":3,"loss":NaN,"g":-Infinity,"h":Infinity,"note":"NaN, Infinity"})");
  REQUIRE(line.has_value());
  CHECK(std::isnan(value_of(*line, "loss")));
  CHECK(value_of(*line, "g") == -INFINITY);
  CHECK(value_of(*line, "h") == INFINITY);
  CHECK(quote_non_finite(R"({"a":"x\"NaN","b":NaN})") == R"({"a":"x\"NaN","b":"nan"})");
}

TEST_CASE("program protocol: heartbeats, blank lines and an integral float step") {
  const auto beat = decode_program_line(R"({"heartbeat": "train.py:57 in step"})");
  REQUIRE(beat.has_value());
  CHECK(beat->kind == ProgramLine::Kind::heartbeat);
  CHECK(beat->where == "train.py:57 in step");
  CHECK(decode_program_line("\r").value().kind == ProgramLine::Kind::heartbeat);
  CHECK(decode_program_line(R"({"step": 4.0})").value().step == 4);
}

TEST_CASE("program protocol: what is not the protocol is refused with a short reason") {
  CHECK(decode_program_line("hello").error() == "not JSON");
  CHECK(decode_program_line("[1, 2]").error() == "a JSON array, not an object");
  CHECK(decode_program_line(R"({"loss": 1})").error() == "no \"step\" field");
  CHECK(decode_program_line(R"({"step": -1})").error() == "\"step\" must be an integer >= 0, found -1");
  CHECK(decode_program_line(R"({"step": 1.5})").error() == "\"step\" must be an integer >= 0, found 1.5");
  CHECK(decode_program_line(R"({"step": "3"})").error() == "\"step\" must be an integer >= 0, found \"3\"");
  const std::string long_line = R"({"step": 1, "pad": ")" + std::string(70000, 'x') + "\"}";
  CHECK(decode_program_line(long_line).error() == "a line of 70022 bytes, over the 64 KiB limit");
  CHECK(decode_program_line("{\"step\": 1, \"loss\": 0.1").error() == "not JSON");  // cut off
}

TEST_CASE("program protocol: a logged step becomes the built-in series (step time, throughput) and its own") {
  const std::vector<std::pair<std::string, double>> values = {{"loss", 0.5}, {"samples", 64}, {"acc", 0.9}};
  const auto first = logged_step_points(1, 1, values, 100.0, std::nullopt);
  REQUIRE(first.size() == 2);  // no step time without a previous step
  CHECK(first[0].name == "loss");
  CHECK(first[0].rank == 1);
  CHECK(first[1].name == "acc");
  const auto second = logged_step_points(1, 2, values, 100.5, 100.0);
  REQUIRE(second.size() == 4);
  CHECK(second[2].name == "step_time_ms");
  CHECK(second[2].value == 500.0);
  CHECK(second[3].name == "samples_per_sec");
  CHECK(second[3].value == 128.0);
  // A program's own step_time_ms wins over the derived one.
  const auto own = logged_step_points(0, 3, {{"step_time_ms", 7.0}}, 101.0, 100.5);
  REQUIRE(own.size() == 1);
  CHECK(own[0].value == 7.0);
}

TEST_CASE("program handover: a part survives its text, non-finite values and how each rank ended included") {
  ProgramPart part;
  part.index = 3;
  part.points = {{3, 1, "loss", 0.5},
                 {3, 2, "loss", std::nan("")},
                 {3, 2, "g", INFINITY},
                 {3, 2, "h", -INFINITY},
                 {3, 2, "step_time_ms", 12.25}};
  part.ranks = {{3, expctl::store::RunStatus::failed, 1, std::nullopt, "node-b", 4242},
                {4, expctl::store::RunStatus::failed, std::nullopt, 9, "node-b", 4243}};
  part.root_cause = "rank 3 exited with code 1\nlast lines of rank 3:\n  boom";
  part.steps_logged = 2;
  part.lines_skipped = 1;
  part.log = "step 1\n\xff not UTF-8\n";
  const ProgramPart back = part_from_text(part_text(part));
  CHECK(back.index == 3);
  REQUIRE(back.points.size() == 5);
  CHECK(back.points[0].value == 0.5);
  CHECK(std::isnan(back.points[1].value));
  CHECK(back.points[2].value == INFINITY);
  CHECK(back.points[3].value == -INFINITY);
  CHECK(back.points[4].name == "step_time_ms");
  CHECK(back.points[4].step == 2);
  REQUIRE(back.ranks.size() == 2);
  CHECK(back.ranks[0].exit_code == 1);
  CHECK_FALSE(back.ranks[0].signal);
  CHECK(back.ranks[1].signal == 9);
  CHECK(back.ranks[1].status == expctl::store::RunStatus::failed);
  CHECK(back.ranks[1].host == "node-b");
  CHECK(back.ranks[1].pid == 4243);
  CHECK(back.root_cause == part.root_cause);
  CHECK(back.steps_logged == 2);
  CHECK(back.lines_skipped == 1);
  CHECK(back.log == "step 1\n\xef\xbf\xbd not UTF-8\n");  // U+FFFD for the stray byte
  CHECK(part_key(3) == "expctl/program/part/3");
  CHECK_THROWS_AS(part_from_text("{\"index\": 1}"), nlohmann::json::exception);
  CHECK_THROWS_AS(part_from_text("not json"), nlohmann::json::exception);
}

TEST_CASE("program protocol: a modules line keeps its file names, ignores the rest, and is not a step") {
  const auto line = decode_program_line(R"({"modules": ["/w/lib/a.py", 3, "/w/b.py"]})");
  REQUIRE(line.has_value());
  CHECK(line->kind == ProgramLine::Kind::modules);
  CHECK(line->modules == std::vector<std::string>{"/w/lib/a.py", "/w/b.py"});
  CHECK(decode_program_line(R"({"modules": "x"})")->modules.empty());
  CHECK(decode_program_line(R"({"step": 1, "modules": ["/w/a.py"]})")->kind == ProgramLine::Kind::step);
}

TEST_CASE("program inputs: a local module that no program.files pattern or program.inputs entry covers is named") {
  const expctl::test::TempDir dir;
  dir.write("train.py", "import lib.util\n");
  dir.write("lib/util.py", "x = 1\n");
  dir.write("data/loader.py", "y = 1\n");
  const auto spec_file = dir / "s.yaml";
  nlohmann::json values;
  values["program"] = {{"command", {"python3", "train.py"}}};
  values["program"]["files"] = nlohmann::json::array();
  values["program"]["inputs"] = nlohmann::json::array();
  const std::set<std::string> modules = {(dir / "train.py").string(), (dir / "lib" / "util.py").string(),
                                         (dir / "data" / "loader.py").string(), "/elsewhere/mod.py"};
  // The default program.files is the script: the rest is not hashed.
  CHECK(unhashed_modules(modules, values, spec_file) ==
        std::vector<std::string>{"/elsewhere/mod.py", "data/loader.py", "lib/util.py"});
  values["program"]["files"] = {"train.py", "lib/*.py"};
  values["program"]["inputs"] = {"data"};
  CHECK(unhashed_modules(modules, values, spec_file) == std::vector<std::string>{"/elsewhere/mod.py"});
}

TEST_CASE("program handover: a peer's part is checked before it is trusted: its index, ranks, steps, names and sizes") {
  ProgramPart part;
  part.index = 1;
  part.points = {{1, 1, "loss", 0.5}};
  part.ranks = {{1, expctl::store::RunStatus::completed, 0, std::nullopt, "node-b", 4242}};
  const auto good = checked_part(part_text(part), 1, 2);
  REQUIRE(good.has_value());
  CHECK(good->points.size() == 1);

  const auto refused = [](const ProgramPart& bad, int index = 1) {
    const auto checked = checked_part(part_text(bad), index, 2);
    REQUIRE_FALSE(checked.has_value());
    return checked.error();
  };
  CHECK(refused(part, 0) == "it names itself part 1");  // it would name another part's log file
  auto bad = part;
  bad.points[0].rank = 7;
  CHECK_THAT(refused(bad), Catch::StartsWith("a point of rank 7, step 1, metric \"loss\" (ranks 0..1"));
  bad = part;
  bad.points[0].step = -3;
  CHECK_THAT(refused(bad), Catch::StartsWith("a point of rank 1, step -3"));
  bad = part;
  bad.points[0].name = "loss\tinjected\n";
  CHECK_THAT(refused(bad), Catch::Contains("names of [A-Za-z0-9_./-]"));
  bad = part;
  bad.ranks[0].rank = -1;
  CHECK(refused(bad) == "a row for rank -1 (ranks 0..1)");
  bad = part;
  bad.log = std::string(k_part_log_bytes + 1, 'x');
  CHECK(refused(bad) == "a log or counts out of bounds");
  CHECK_THAT(checked_part("[1, 2]", 1, 2).error(), Catch::StartsWith("not a part ("));
  CHECK_THAT(checked_part(std::string(k_max_part_bytes + 1, ' '), 1, 2).error(),
             Catch::EndsWith("bytes, over the 256 MiB limit"));
}
