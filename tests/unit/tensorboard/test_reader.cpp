// The event files read by a reader expctl did not write (tests/tools/read_tfevents.py): every
// record's CRCs, file_version first, and every scalar equal as float32 to what the store holds.
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "expctl/tensorboard/event_proto.hpp"
#include "expctl/tensorboard/event_writer.hpp"
#include "expctl/tensorboard/export.hpp"
#include "reader.hpp"
#include "support/test_support.hpp"
#include "synthetic_store.hpp"

using namespace expctl;
using namespace expctl::test::tensorboard;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// A reader value back as float32 ("nan", "inf", "-inf" for the non-finite ones).
float reader_value(const json& value) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    return text == "nan" ? std::numeric_limits<float>::quiet_NaN()
                         : (text == "inf" ? 1.0F : -1.0F) * std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(value.get<double>());
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

/// Checks what every file must be and returns the files' events keyed by (tag, step).
std::map<std::pair<std::string, std::int64_t>, json> checked_events(const json& files) {
  std::map<std::pair<std::string, std::int64_t>, json> events;
  for (const json& file : files) {
    CAPTURE(file.at("path"));
    CHECK(file.at("records").get<int>() >= 1);
    CHECK(file.at("crc_errors") == 0);
    CHECK(file.at("truncated") == false);
    CHECK(file.at("unknown_fields") == 0);
    CHECK(file.at("file_version") == "brain.Event:2");
    for (const json& event : file.at("events")) {
      const auto key = std::pair(event.at("tag").get<std::string>(), event.at("step").get<std::int64_t>());
      CHECK(events.emplace(key, event).second);  // each (tag, step) once
    }
  }
  return events;
}

std::set<std::string> subfolders(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) {
      names.insert(entry.path().filename().string());
    }
  }
  return names;
}

void check_rank(const json& files, const store::Store& db, const store::RunRecord& run, int rank) {
  const auto events = checked_events(files);
  const auto points = db.metrics(run.id, {.rank = rank});
  CHECK(events.size() == points.size());
  double elapsed_ms = 0.0;
  for (const store::MetricPoint& point : points) {  // ordered by name, then step
    CAPTURE(run.id, rank, point.name, point.step);
    const auto found = events.find({point.name, point.step});
    REQUIRE(found != events.end());
    CHECK(same_float(reader_value(found->second.at("value")), static_cast<float>(point.value)));
    if (point.name == "step_time_ms") {
      elapsed_ms += point.value;
      CHECK(found->second.at("wall_time").get<double>() ==
            Approx(started_seconds(run) + elapsed_ms / 1000.0).epsilon(1e-12));
    }
  }
}

/// The job series, computed here from the store's points (not by the module under test).
std::map<std::pair<std::string, std::int64_t>, double> expected_job(const store::Store& db, const store::RunRecord& run) {
  std::map<std::pair<std::string, std::int64_t>, std::map<int, double>> by_step;
  for (const store::MetricPoint& point : db.metrics(run.id)) {
    by_step[{point.name, point.step}][point.rank] = point.value;
  }
  std::map<std::pair<std::string, std::int64_t>, double> job;
  for (std::int64_t step = 1; step <= k_steps; ++step) {
    const auto& times = by_step[{"step_time_ms", step}];
    const auto& waits = by_step[{"comm_wait_ms", step}];
    const auto& rates = by_step[{"samples_per_sec", step}];
    const auto& losses = by_step[{"loss", step}];
    job[{"samples_per_sec", step}] = rates.at(0) + rates.at(1);
    job[{"step_time_ms", step}] = std::max(times.at(0), times.at(1));
    job[{"comm_wait_fraction", step}] = (waits.at(0) + waits.at(1)) / (times.at(0) + times.at(1));
    job[{"loss", step}] = (losses.at(0) + losses.at(1)) / 2.0;
  }
  return job;
}

void check_job(const json& files, const store::Store& db, const store::RunRecord& run) {
  const auto events = checked_events(files);
  const auto expected = expected_job(db, run);
  CHECK(events.size() == expected.size());
  for (const auto& [key, value] : expected) {
    CAPTURE(run.id, key.first, key.second);
    const auto found = events.find(key);
    REQUIRE(found != events.end());
    CHECK(same_float(reader_value(found->second.at("value")), static_cast<float>(value)));
  }
}

}  // namespace

TEST_CASE("tensorboard: an independent reader checks EventWriter's CRCs, file_version and float32 values") {
  const auto tools = find_reader_tools();
  if (const auto* missing = std::get_if<std::string>(&tools)) {
    expctl::test::skip("tensorboard-reader", *missing);
    return;
  }
  expctl::test::TempDir dir;
  const std::vector<std::pair<std::int64_t, double>> written{
      {0, 0.0}, {1, 0.1}, {-3, -2.5}, {std::int64_t{1} << 40, 1e30}, {7, std::nan("")},
      {8, std::numeric_limits<double>::infinity()}, {9, 3.14159265358979}};
  fs::path path;
  {
    tensorboard::EventWriter writer(dir / "events", "test", 1700000000.25);
    for (const auto& [step, value] : written) {
      writer.add_scalar("scalars/value", step, value, 1700000000.25 + static_cast<double>(step % 100));
    }
    writer.add_session_start(5, 1700000001.0);
    writer.close();
    path = writer.path();
  }
  const json read = read_tfevents(std::get<ReaderTools>(tools), dir / "py", {dir / "events"});
  REQUIRE(read.at("files").size() == 1);
  const json& file = read.at("files")[0];
  CHECK(file.at("path") == path.string());
  CHECK(file.at("records") == written.size() + 2);
  CHECK(file.at("session_starts") == json::array({5}));
  const auto events = checked_events(read.at("files"));
  for (const auto& [step, value] : written) {
    CAPTURE(step, value);
    const json& event = events.at({"scalars/value", step});
    CHECK(same_float(reader_value(event.at("value")), static_cast<float>(value)));
    CHECK(event.at("wall_time").get<double>() == 1700000000.25 + static_cast<double>(step % 100));
  }
}

TEST_CASE("tensorboard: an independent reader finds two exported runs side by side, each scalar as stored") {
  const auto tools = find_reader_tools();
  if (const auto* missing = std::get_if<std::string>(&tools)) {
    expctl::test::skip("tensorboard-reader", *missing);
    return;
  }
  SyntheticStore fixture;
  expctl::test::TempDir out;
  const auto exported = tensorboard::export_runs(fixture.db, fixture.runs, out / "tb");
  REQUIRE(exported.size() == 2);
  CHECK(subfolders(out / "tb") == std::set<std::string>{fixture.runs[0].id, fixture.runs[1].id});
  const ReaderTools& reader = std::get<ReaderTools>(tools);
  for (const store::RunRecord& run : fixture.runs) {
    CAPTURE(run.id);
    const fs::path dir = out / "tb" / run.id;
    REQUIRE(subfolders(dir) == std::set<std::string>{"rank0", "rank1", "job"});
    for (int rank = 0; rank < k_ranks; ++rank) {
      const json read = read_tfevents(reader, out / "py", {dir / ("rank" + std::to_string(rank))});
      REQUIRE(read.at("files").size() == 1);
      check_rank(read.at("files"), fixture.db, run, rank);
    }
    const json job = read_tfevents(reader, out / "py", {dir / "job"});
    REQUIRE(job.at("files").size() == 1);
    check_job(job.at("files"), fixture.db, run);
  }
}

TEST_CASE("tensorboard: the independent reader is not vacuous: it reports a flipped bit and a wrong field number") {
  const auto tools = find_reader_tools();
  if (const auto* missing = std::get_if<std::string>(&tools)) {
    expctl::test::skip("tensorboard-reader", *missing);
    return;
  }
  expctl::test::TempDir dir;
  std::string blob = tensorboard::tfrecord(tensorboard::file_version_event(1.0));
  const tensorboard::Scalar scalar{"loss", 1.5F};
  std::string flipped = tensorboard::tfrecord(tensorboard::scalars_event(1, 2.0, std::span(&scalar, 1)));
  flipped[20] = static_cast<char>(flipped[20] ^ 0x01);  // inside the data
  // Field 11 (wire type 0) is not a field of Event: decoded as an unknown field.
  const std::string unknown = tensorboard::tfrecord(std::string("\x58\x01", 2));
  blob += flipped + unknown;
  const fs::path path = dir.write("events.out.tfevents.1.test", blob);
  const json read = read_tfevents(std::get<ReaderTools>(tools), dir / "py", {path});
  REQUIRE(read.at("files").size() == 1);
  const json& file = read.at("files")[0];
  CHECK(file.at("records") == 3);
  CHECK(file.at("crc_errors") == 1);
  CHECK(file.at("unknown_fields") == 1);
  CHECK(file.at("file_version") == "brain.Event:2");
}

TEST_CASE("tensorboard: a 2-rank run with --tensorboard writes what the independent reader finds in the store") {
  const auto tools = find_reader_tools();
  if (const auto* missing = std::get_if<std::string>(&tools)) {
    expctl::test::skip("tensorboard-reader", *missing);
    return;
  }
  expctl::test::TempDir dir;
  const fs::path db_path = dir / "expctl.db";
  const auto ran = expctl::test::run_expctl(
      {"--db", db_path.string(), "run", (expctl::test::source_dir() / "experiments" / "tiny-synthetic.yaml").string(),
       "--tensorboard", (dir / "tb").string(), "--format", "json"});
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  const auto db = store::Store::open(db_path, store::OpenMode::read_only);
  const store::RunRecord run = db.find_run(json::parse(ran.out).at("run").at("id").get<std::string>());
  const fs::path run_dir = dir / "tb" / run.id;
  REQUIRE(subfolders(run_dir) == std::set<std::string>{"rank0", "rank1", "job"});
  const ReaderTools& reader = std::get<ReaderTools>(tools);
  for (int rank = 0; rank < 2; ++rank) {
    const json read = read_tfevents(reader, dir / "py", {run_dir / ("rank" + std::to_string(rank))});
    REQUIRE(read.at("files").size() == 1);
    check_rank(read.at("files"), db, run, rank);  // every stored point, straggler scores included
  }
  CHECK(db.metrics(run.id, {.name = "straggler_score", .rank = 1}).size() == 60);
  const json job = read_tfevents(reader, dir / "py", {run_dir / "job"});
  REQUIRE(job.at("files").size() == 1);
  CHECK(checked_events(job.at("files")).size() == 60 * std::size(tensorboard::k_job_series));
}
