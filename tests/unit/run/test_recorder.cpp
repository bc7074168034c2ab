// The recorder turns records into stored metrics off the supervisor's thread, keeps NaN as a
// value, buffers while another process holds the store, and reports other store failures.
#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "decode.hpp"
#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sqlite3.h>

#include "expctl/run/recorder.hpp"
#include "expctl/store/testing.hpp"

namespace {

using namespace expctl;
using nlohmann::json;

struct Fixture {
  test::TempDir dir;
  std::filesystem::path db_path = dir / "results" / "expctl.db";
  store::Store db = store::Store::open(db_path);
  store::RunRecord run;
  run::SilentObserver console;

  Fixture() {
    db.put_spec(std::string(64, 'a'), "{}", "recorder");
    run = db.create_run({std::string(64, 'a'), std::nullopt, "recorder", std::nullopt});
  }
};

std::string step_record(std::int64_t step, double loss) {
  train::StepMetrics metrics;
  metrics.step = step;
  metrics.loss = loss;
  metrics.lr = 0.1;
  metrics.step_time_s = 0.002;
  metrics.comm_wait_s = 0.0005;
  metrics.samples_per_sec = 1000.0;
  return train::encode_step(metrics).dump();
}

/// Another process's write lock, held until destroyed (BEGIN IMMEDIATE on its own connection).
class HeldLock {
 public:
  explicit HeldLock(const std::filesystem::path& path) {
    REQUIRE(sqlite3_open(path.c_str(), &m_db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(m_db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~HeldLock() {
    sqlite3_exec(m_db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(m_db);
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

 private:
  sqlite3* m_db = nullptr;
};

}  // namespace

TEST_CASE("recorder: step records become per-step metrics of their rank, NaN kept as a value", "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    recorder.on_record(0, step_record(1, 2.5));
    recorder.on_record(1, step_record(1, 2.25));
    recorder.on_record(0, step_record(2, std::numeric_limits<double>::quiet_NaN()));
    recorder.on_record(1, "not json at all");
    recorder.drain();
    const auto divergence = recorder.divergence();
    REQUIRE(divergence.has_value());
    CHECK(divergence->step == 2);
    CHECK(divergence->losses.size() == 1);
    CHECK(divergence->losses.count(0) == 1);
  }
  const auto losses = f.db.metrics(f.run.id, {.name = "loss", .rank = 0});
  REQUIRE(losses.size() == 2);
  CHECK(losses[0].value == 2.5);
  CHECK(std::isnan(losses[1].value));
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 1}).size() == 1);
  const auto times = f.db.metrics(f.run.id, {.name = "step_time_ms", .rank = 0});
  REQUIRE(times.size() == 2);
  CHECK(times[0].value == Approx(2.0));  // seconds in the record, milliseconds in the store
}

TEST_CASE(
    "recorder: timers are stored as whole nanoseconds in milliseconds, throughput to 6 digits, the loss as "
    "recorded",
    "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    train::StepMetrics metrics;
    metrics.step = 1;
    metrics.loss = 0.1 + 0.2;                 // a full-precision double, kept bit for bit
    metrics.forward_s = 0.016729728;          // x 1000 is 16.729727999999998
    metrics.backward_s = 0.030000001 - 0.01;  // a difference of laps: 0.020000000999999996
    metrics.step_time_s = 0.0123456789;       // ns are the clock's resolution: 12.345679 ms
    metrics.samples_per_sec = 64.0 / 0.0123456789;
    recorder.on_record(0, train::encode_step(metrics).dump());
    recorder.drain();
  }
  const auto only = [&](const char* name) {
    const auto points = f.db.metrics(f.run.id, {.name = name, .rank = 0});
    REQUIRE(points.size() == 1);
    return points.front().value;
  };
  CHECK(0.016729728 * 1000.0 != 16.729728);
  CHECK(std::bit_cast<std::uint64_t>(only("forward_ms")) == std::bit_cast<std::uint64_t>(16.729728));
  CHECK(std::bit_cast<std::uint64_t>(only("backward_ms")) == std::bit_cast<std::uint64_t>(20.000001));
  CHECK(std::bit_cast<std::uint64_t>(only("step_time_ms")) == std::bit_cast<std::uint64_t>(12.345679));
  CHECK(std::bit_cast<std::uint64_t>(only("loss")) == std::bit_cast<std::uint64_t>(0.1 + 0.2));
  // The rules themselves, at their edges.
  CHECK(run::stored_ratio(1234567.89) == 1234568.0);
  CHECK(run::stored_ratio(0.000123456789) == 0.000123457);
  CHECK(run::stored_ratio(-98.7654321) == -98.7654);
  CHECK(run::stored_ratio(1e-20) == 1e-20);  // beyond 15 decimals: as it is
  CHECK(std::signbit(run::stored_ratio(-0.0)));
  CHECK(std::isnan(run::stored_ratio(std::numeric_limits<double>::quiet_NaN())));
  CHECK(run::stored_ratio(std::numeric_limits<double>::infinity()) == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(run::stored_milliseconds(std::numeric_limits<double>::quiet_NaN())));
  CHECK(run::stored_milliseconds(-0.25) == -250.0);
  // Throughput, a quotient of the step time, to 6 significant digits (5184.000047 samples/s).
  CHECK(64.0 / 0.0123456789 != 5184.0);
  CHECK(std::bit_cast<std::uint64_t>(only("samples_per_sec")) == std::bit_cast<std::uint64_t>(5184.0));
}

TEST_CASE("recorder: a store locked by another process delays writes and loses nothing", "[run][recorder]") {
  Fixture f;
  run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
  {
    HeldLock lock(f.db_path);
    for (int step = 1; step <= 200; ++step) {
      recorder.on_record(0, step_record(step, 1.0 / step));  // returns at once: nothing blocks here
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    CHECK_FALSE(recorder.fatal_error().has_value());
  }
  recorder.drain();
  CHECK_FALSE(recorder.fatal_error().has_value());
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 0}).size() == 200);
}

TEST_CASE("recorder: a full disk is a fatal error reported to the supervisor and never thrown at it",
          "[run][recorder]") {
  Fixture f;
  store::testing::limit_database_pages(f.db, 40);
  run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
  for (int step = 1; step <= 20000 && !recorder.fatal_error(); ++step) {
    REQUIRE_NOTHROW(recorder.on_record(0, step_record(step, 1.0)));
    if (step % 2000 == 0) {
      recorder.drain();
    }
  }
  REQUIRE(recorder.fatal_error().has_value());
  CHECK_THAT(*recorder.fatal_error(), Catch::Contains("no space left on device"));
  CHECK_NOTHROW(recorder.on_record(0, step_record(20001, 1.0)));
  CHECK_THROWS_WITH(recorder.throw_if_fatal(), Catch::Contains("no space left on device"));
}

TEST_CASE("recorder: a checkpoint record becomes an artifact relative to the run folder", "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    recorder.on_record(0, json{{"t", "checkpoint"},
                               {"path", (f.run.run_dir / "checkpoints" / "rank0-step5.pt").string()},
                               {"step", 5},
                               {"sha256", std::string(64, 'b')},
                               {"size_bytes", 123}}
                              .dump());
  }
  const auto artifacts = f.db.artifacts(f.run.id);
  REQUIRE(artifacts.size() == 1);
  CHECK(artifacts[0].path == "checkpoints/rank0-step5.pt");
  CHECK(artifacts[0].size_bytes == 123);
}

namespace {

// Every record kind a rank reports, in the order a worker reports them, to `sink`.
void report_all(train::MetricSink& sink, const std::filesystem::path& run_dir) {
  sink.on_start({0, 2, 3, 10, false});
  sink.on_collectives("gloo");
  for (std::int64_t step = 1; step <= 3; ++step) {
    train::StepMetrics metrics;
    metrics.step = step;
    metrics.loss = step == 3 ? std::numeric_limits<double>::infinity() : 1.0 / static_cast<double>(step);
    metrics.step_time_s = 0.01;
    metrics.forward_s = 0.004;
    metrics.samples_per_sec = 640.0;
    sink.on_step(metrics);
  }
  sink.on_eval({3, 0.5, 0.75});
  train::CheckpointFile checkpoint;
  checkpoint.path = run_dir / "checkpoints" / "rank0-step3.pt";
  checkpoint.step = 3;
  checkpoint.sha256 = std::string(64, 'c');
  checkpoint.size_bytes = 77;
  sink.on_checkpoint(checkpoint);
  train::StepMetrics remote;
  remote.step = 2;
  remote.loss = 0.25;
  sink.on_remote_steps(1, {remote});
  sink.on_skipped_images({"b.jpg", "a.jpg"});
  sink.on_end({3, false, 0.25});
}

// A sink that hands each typed record to the recorder as it is (rank 0 in the recording process).
class TypedSink final : public train::MetricSink {
 public:
  explicit TypedSink(run::Recorder& recorder) : m_recorder(recorder) {}
  void on_start(const train::TrainingStart& start) override { m_recorder.on_start(start); }
  void on_step(const train::StepMetrics& m) override { m_recorder.on_step(0, m); }
  void on_eval(const train::EvalMetrics& m) override { m_recorder.on_eval(m); }
  void on_checkpoint(const train::CheckpointFile& file) override { m_recorder.on_checkpoint(file); }
  void on_remote_steps(int rank, const std::vector<train::StepMetrics>& steps) override {
    m_recorder.on_remote_steps(rank, steps);
  }
  void on_collectives(const std::string& allreduce) override { m_recorder.on_collectives(allreduce); }
  void on_skipped_images(const std::vector<std::string>& files) override { m_recorder.on_skipped_images(files); }

 private:
  run::Recorder& m_recorder;
};

std::string stored(const store::Store& db, const std::string& run) {
  std::string text;
  for (const auto& point : db.metrics(run)) {
    text += fmt::format("{} {} {} {}\n", point.rank, point.step, point.name, point.value);
  }
  for (const auto& artifact : db.artifacts(run)) {
    text += fmt::format("{} {} {}\n", artifact.path, artifact.sha256, artifact.size_bytes);
  }
  return text;
}

}  // namespace

TEST_CASE("recorder: a rank's records store the same whether they come typed or over the wire", "[run][recorder]") {
  Fixture f;
  const auto wire_run = f.db.create_run({std::string(64, 'a'), std::nullopt, "recorder", std::nullopt});
  run::RunFacts typed_facts;
  run::RunFacts wire_facts;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    TypedSink sink(recorder);
    report_all(sink, f.run.run_dir);
    recorder.drain();
    typed_facts = recorder.facts();
  }
  {
    run::Recorder recorder(f.db, wire_run.id, wire_run.run_dir, f.console, std::chrono::steady_clock::now());
    train::RecordEncoder encoder(0, [&recorder](const json& record) { recorder.on_record(0, record.dump()); });
    report_all(encoder, wire_run.run_dir);
    recorder.drain();
    wire_facts = recorder.facts();
  }
  CHECK(stored(f.db, f.run.id) == stored(f.db, wire_run.id));
  CHECK(stored(f.db, f.run.id).find("checkpoints/rank0-step3.pt") != std::string::npos);
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 1}).size() == 1);  // the remote rank's step
  CHECK(typed_facts.allreduce == wire_facts.allreduce);
  CHECK(typed_facts.allreduce == std::optional<std::string>("gloo"));
  CHECK(typed_facts.skipped_images == wire_facts.skipped_images);
  CHECK(typed_facts.skipped_images.size() == 2);
}

namespace {

std::string timed_step(std::int64_t step, double forward_s, double backward_s, double optimizer_s) {
  train::StepMetrics metrics;
  metrics.step = step;
  metrics.loss = 1.0;
  metrics.step_time_s = forward_s + backward_s + optimizer_s + 0.001;
  metrics.forward_s = forward_s;
  metrics.backward_s = backward_s;
  metrics.optimizer_s = optimizer_s;
  metrics.data_wait_s = 0.0001;
  metrics.allreduce_bytes = 4096.0;
  return train::encode_step(metrics).dump();
}

std::map<int, double> scores_at(const store::Store& db, const std::string& run, std::int64_t step) {
  std::map<int, double> scores;
  for (const auto& point : db.metrics(run, {.name = "straggler_score"})) {
    if (point.step == step) {
      scores[point.rank] = point.value;
    }
  }
  return scores;
}

}  // namespace

TEST_CASE("straggler scores: each rank's compute time over the median, only when every rank reported",
          "[run][recorder]") {
  auto step = [](double compute) {
    train::StepMetrics metrics;
    metrics.forward_s = compute;
    return metrics;
  };
  const auto scores = run::straggler_scores({{0, step(0.01)}, {1, step(0.01)}, {2, step(0.02)}}, 3);
  REQUIRE(scores.size() == 3);
  CHECK(scores.at(0) == Approx(1.0));
  CHECK(scores.at(2) == Approx(2.0));
  CHECK(run::straggler_scores({{0, step(0.01)}, {1, step(0.02)}}, 3).empty());  // rank 2 missing
  CHECK(run::straggler_scores({{0, step(0.01)}}, 1).empty());                  // nobody to compare with
  const auto two = run::straggler_scores({{0, step(0.01)}, {1, step(0.03)}}, 2);
  CHECK(two.at(1) == Approx(1.5));  // median of two is their mean
}

TEST_CASE("recorder: phase timers are stored per rank and a slow rank's straggler score is stored with its step",
          "[run][recorder]") {
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now(), 2);
    recorder.on_record(0, timed_step(1, 0.010, 0.020, 0.002));
    recorder.on_record(1, timed_step(1, 0.020, 0.040, 0.004));  // twice as slow
    recorder.on_record(1, timed_step(2, 0.010, 0.020, 0.002));
    recorder.on_record(0, timed_step(2, 0.010, 0.020, 0.002));
    recorder.on_record(0, timed_step(3, 0.010, 0.020, 0.002));  // rank 1 never reports step 3
    recorder.drain();
  }
  const auto first = scores_at(f.db, f.run.id, 1);
  REQUIRE(first.size() == 2);
  CHECK(first.at(1) / first.at(0) == Approx(2.0));
  CHECK(first.at(1) == 1.33333);  // 4 / 3 to 6 significant digits
  const auto second = scores_at(f.db, f.run.id, 2);
  REQUIRE(second.size() == 2);
  CHECK(second.at(0) == Approx(1.0));
  CHECK(scores_at(f.db, f.run.id, 3).empty());                                  // incomplete: no score,
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 0}).size() == 3);      // but its points are kept
  const auto forward = f.db.metrics(f.run.id, {.name = "forward_ms", .rank = 1});
  REQUIRE(forward.size() == 2);
  CHECK(forward[0].value == Approx(20.0));
  CHECK(f.db.metrics(f.run.id, {.name = "backward_ms", .rank = 0}).size() == 3);
  CHECK(f.db.metrics(f.run.id, {.name = "optimizer_ms", .rank = 0}).size() == 3);
  CHECK(f.db.metrics(f.run.id, {.name = "data_wait_ms", .rank = 0}).front().value == Approx(0.1));
  CHECK(f.db.metrics(f.run.id, {.name = "allreduce_bytes", .rank = 1}).front().value == 4096.0);
}

TEST_CASE("recorder: with a TensorBoard export every stored point is also in the rank's event file",
          "[run][recorder]") {
  Fixture f;
  const auto out = f.dir / "tb";
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now(), 2);
    recorder.export_tensorboard(
        std::make_unique<tensorboard::LiveExport>(out, f.run, tensorboard::LiveOptions{.world_size = 2}));
    for (int step = 1; step <= 3; ++step) {
      recorder.on_record(0, timed_step(step, 0.010, 0.020, 0.002));
      recorder.on_record(1, timed_step(step, 0.010, 0.020, 0.002));
    }
  }
  // Each rank's stored points, decoded back out of that rank's event files (tests/unit/tensorboard/
  // decode.hpp): same tag, step and value (as float32, the event files' precision).
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto stored = f.db.metrics(f.run.id, {.rank = rank});
    REQUIRE(stored.size() >= 3 * 4);  // 3 steps of loss, lr, step times... at least
    const auto files = test::tensorboard::event_files(out / f.run.id / ("rank" + std::to_string(rank)));
    REQUIRE_FALSE(files.empty());
    for (const auto& file : files) {
      const auto decoded = test::tensorboard::decode_file(file);
      CHECK(decoded.crc_errors == 0);
      CHECK_FALSE(decoded.truncated);
    }
    const auto written = test::tensorboard::scalars_in(out / f.run.id / ("rank" + std::to_string(rank)));
    for (const auto& point : stored) {
      CAPTURE(point.name, point.step, point.value);
      const auto found = std::find_if(written.begin(), written.end(), [&](const test::tensorboard::Point& p) {
        return p.tag == point.name && p.step == point.step &&
               p.bits == std::bit_cast<std::uint32_t>(static_cast<float>(point.value));
      });
      CHECK(found != written.end());
    }
  }
  // The job's series: one point per step and series, for the 3 steps both ranks reported.
  const auto job = test::tensorboard::scalars_in(out / f.run.id / "job");
  CHECK(job.size() == 3 * std::size(tensorboard::k_job_series));
}

TEST_CASE("recorder: a TensorBoard folder that cannot be written ends the export, not the recording",
          "[run][recorder]") {
  Fixture f;
  const auto blocked = f.dir / "not-a-dir";
  { std::ofstream(blocked) << "a file where the folder should be"; }
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now(), 1);
    recorder.export_tensorboard(std::make_unique<tensorboard::LiveExport>(blocked, f.run));
    recorder.on_record(0, step_record(1, 2.5));
    recorder.on_record(0, step_record(2, 2.0));
    recorder.drain();
    CHECK_FALSE(recorder.fatal_error().has_value());
  }
  CHECK(f.db.metrics(f.run.id, {.name = "loss", .rank = 0}).size() == 2);
}

TEST_CASE("recorder: waits on a store failure of kind busy, by its kind, never by its message text") {
  using store::FailureKind;
  CHECK(run::is_store_busy(store::Error("results/expctl.db: locked", FailureKind::busy, util::ExitCode::run_failed)));
  CHECK(run::is_store_busy(store::Error("postgresql://db/x: deadlock that kept recurring for 2 minutes: retry",
                                        FailureKind::busy, util::ExitCode::run_failed)));
  // Today's SQLite wording without the kind is not "busy" any more: nothing matches text.
  CHECK_FALSE(run::is_store_busy(util::StoreError(
      "results/expctl.db: still in use by another process after retrying for 2 minutes; retry when it has finished",
      util::ExitCode::run_failed)));
  CHECK_FALSE(run::is_store_busy(
      store::Error("postgresql://db/x: cannot connect", FailureKind::unreachable, util::ExitCode::usage)));
}

TEST_CASE("recorder: records of the wrong shape are dropped - never thrown at the supervisor, never failing the run",
          "[run][recorder]") {
  // Found by fuzz_control_record (fuzz/regressions/control_record/): a checkpoint record with a
  // short sha256 reached the store, whose refusal failed the run as a fatal store error; a string
  // "world_size" or a numeric "path" threw nlohmann's type_error out of on_record; a step of 1e300
  // or "nan" was converted to an integer (undefined behaviour).
  Fixture f;
  {
    run::Recorder recorder(f.db, f.run.id, f.run.run_dir, f.console, std::chrono::steady_clock::now());
    auto huge_step = json::parse(step_record(1, 0.5));
    huge_step["step"] = 1e300;
    auto nan_epoch = json::parse(step_record(2, 0.5));
    nan_epoch["epoch"] = "nan";
    for (const json& record :
         {json{{"t", "checkpoint"}, {"path", "x.pt"}, {"step", 3}, {"sha256", "00"}, {"size_bytes", 12}},
          json{{"t", "checkpoint"}, {"path", 7}, {"sha256", std::string(64, 'b')}, {"size_bytes", 12}},
          json{{"t", "checkpoint"}, {"path", "x.pt"}, {"sha256", std::string(64, 'b')}, {"size_bytes", -1}},
          json{{"t", "start"}, {"world_size", "2"}, {"total_steps", 1e300}},
          json{{"t", "collectives"}, {"allreduce", 5}}, json{{"t", "remote_steps"}, {"rank", "2"}, {"rows", json::array()}},
          json{{"t", 5}}, huge_step, nan_epoch}) {
      CAPTURE(record.dump());
      CHECK_NOTHROW(recorder.on_record(0, record.dump()));
    }
    recorder.on_record(0, step_record(7, 0.25));
    recorder.drain();
    CHECK_FALSE(recorder.fatal_error().has_value());
  }
  CHECK(f.db.artifacts(f.run.id).empty());
  const auto loss = f.db.metrics(f.run.id, {.name = "loss", .rank = 0});
  REQUIRE(loss.size() == 1);
  CHECK(loss[0].step == 7);
}
