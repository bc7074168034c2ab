// LiveExport on its own, fed as the recorder would feed it, and export_runs against it.
#include <cmath>

#include <catch2/catch.hpp>

#include "decode.hpp"
#include "expctl/tensorboard/export.hpp"
#include "expctl/tensorboard/live_export.hpp"
#include "synthetic_store.hpp"

using namespace expctl;
using namespace expctl::test::tensorboard;
using expctl::tensorboard::LiveExport;
namespace fs = std::filesystem;

namespace {

const auto k_started = *store::parse_utc("2026-03-01T10:00:00.250Z");
const double k_started_s = std::chrono::duration<double>(k_started.time_since_epoch()).count();

std::vector<Point> with_tag(const std::vector<Point>& points, const std::string& tag) {
  std::vector<Point> out;
  std::copy_if(points.begin(), points.end(), std::back_inserter(out), [&](const Point& p) { return p.tag == tag; });
  return out;
}

void feed(LiveExport& live, int run) {
  for (const auto& batch : recorder_batches(run)) {
    live.on_points(batch);
  }
}

}  // namespace

TEST_CASE("tensorboard: LiveExport writes rank<R>/ with every metric as stored, eval under rank 0, and job/") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "run-1", k_started, {.world_size = k_ranks});
  feed(live, 0);
  live.finish();
  CHECK(live.run_dir() == out / "run-1");
  for (const char* folder : {"rank0", "rank1", "job"}) {
    CAPTURE(folder);
    REQUIRE(event_files(out / "run-1" / folder).size() == 1);
    const DecodedFile file = decode_file(event_files(out / "run-1" / folder).front());
    CHECK(file.crc_errors == 0);
    CHECK(file.events.front().file_version == "brain.Event:2");
  }
  const auto rank0 = scalars_in(out / "run-1" / "rank0");
  const auto rank1 = scalars_in(out / "run-1" / "rank1");
  CHECK(rank0.size() == 7 * k_steps + 2 * (k_steps / k_eval_every));
  CHECK(rank1.size() == 7 * k_steps);
  CHECK(with_tag(rank1, "eval_loss").empty());
  const auto eval = with_tag(rank0, "eval_accuracy");
  REQUIRE(eval.size() == 2);
  CHECK(eval[1].step == 10);
  CHECK(eval[1].value() == static_cast<float>(0.1 + 0.03 * 10));
  const auto files = live.files();
  REQUIRE(files.size() == 3);
  CHECK(files[0].points == static_cast<std::int64_t>(rank0.size()));
  CHECK(files[2].path.parent_path() == out / "run-1" / "job");
}

TEST_CASE("tensorboard: a rank's wall times are started_at plus its step times so far, eval takes the sum so far") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = k_ranks});
  feed(live, 0);
  live.finish();
  const auto rank1 = scalars_in(out / "r" / "rank1");
  double elapsed_ms = 0.0;
  for (std::int64_t step = 1; step <= k_steps; ++step) {
    elapsed_ms += step_points(0, 1, step)[4].value;
    const auto at_step = std::find_if(rank1.begin(), rank1.end(), [&](const Point& p) { return p.step == step; });
    REQUIRE(at_step != rank1.end());
    CHECK(at_step->wall_time == Approx(k_started_s + elapsed_ms / 1000.0).epsilon(1e-12));
  }
  const auto rank0 = scalars_in(out / "r" / "rank0");
  const auto eval = with_tag(rank0, "eval_loss");
  const auto loss = with_tag(rank0, "loss");
  REQUIRE(eval.size() == 2);
  CHECK(eval[0].wall_time == loss[k_eval_every - 1].wall_time);
}

TEST_CASE("tensorboard: a job point sums throughput, takes the slowest step, the wait fraction and the mean loss") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = k_ranks});
  feed(live, 1);
  live.finish();
  const auto job = scalars_in(out / "r" / "job");
  CHECK(job.size() == 4 * k_steps);
  for (std::int64_t step = 1; step <= k_steps; ++step) {
    CAPTURE(step);
    const auto a = step_points(1, 0, step);
    const auto b = step_points(1, 1, step);
    const auto value = [&](const char* tag) {
      const auto found =
          std::find_if(job.begin(), job.end(), [&](const Point& p) { return p.tag == tag && p.step == step; });
      REQUIRE(found != job.end());
      return found->value();
    };
    CHECK(value("samples_per_sec") == static_cast<float>(a[6].value + b[6].value));
    CHECK(value("step_time_ms") == static_cast<float>(std::max(a[4].value, b[4].value)));
    CHECK(value("comm_wait_fraction") == static_cast<float>((a[5].value + b[5].value) / (a[4].value + b[4].value)));
    if (step == k_steps) {
      CHECK(std::isnan(value("loss")));  // rank 1 diverged: the mean is NaN, as TensorBoard should show
    } else {
      CHECK(value("loss") == static_cast<float>((a[0].value + b[0].value) / 2.0));
    }
  }
}

TEST_CASE("tensorboard: a job point appears once every rank reported its step, and flush shows it to readers") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = 2});
  live.on_points(step_points(0, 0, 1));
  live.flush();
  CHECK(scalars_in(out / "r" / "rank0").size() == 7);
  CHECK_FALSE(fs::exists(out / "r" / "job"));
  live.on_points(step_points(0, 1, 1));
  live.on_points(step_points(0, 0, 2));
  live.flush();
  const auto job = scalars_in(out / "r" / "job");
  CHECK(job.size() == 4);
  CHECK(std::all_of(job.begin(), job.end(), [](const Point& p) { return p.step == 1; }));
  live.finish();
  CHECK(scalars_in(out / "r" / "job").size() == 4);  // step 2 of rank 1 never came: no job point for it
}

TEST_CASE("tensorboard: finish writes the job points of ranks that never report (another node's) without them") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = 4});
  live.on_points(step_points(0, 0, 1));
  live.on_points(step_points(0, 1, 1));
  live.flush();
  CHECK_FALSE(fs::exists(out / "r" / "job"));
  live.finish();
  CHECK(scalars_in(out / "r" / "job").size() == 4);
}

TEST_CASE("tensorboard: a resumed invocation starts each file with SessionLog START after the checkpoint step") {
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = 1, .resumed_from = 40});
  live.on_points(step_points(0, 0, 41));
  live.finish();
  for (const char* folder : {"rank0", "job"}) {
    const DecodedFile file = decode_file(event_files(out / "r" / folder).front());
    REQUIRE(file.events.size() == 3);
    CHECK(file.events[0].file_version == "brain.Event:2");
    CHECK(file.events[1].session_start);
    CHECK(file.events[1].step == 41);
    CHECK(file.events[2].step == 41);
  }
}

TEST_CASE("tensorboard: a resumed invocation whose ranks start before the checkpoint starts its files there") {
  // Multi-node: this node's checkpoint is at 40, but another node has none, so every rank starts
  // again from step 0; START at 1 drops all of the earlier files' steps, so none shows twice.
  expctl::test::TempDir out;
  LiveExport live(out.path(), "r", k_started, {.world_size = 1, .resumed_from = 40});
  live.on_points(step_points(0, 0, 1));
  live.on_points(step_points(0, 0, 2));
  live.finish();
  for (const char* folder : {"rank0", "job"}) {
    const DecodedFile file = decode_file(event_files(out / "r" / folder).front());
    REQUIRE(file.events.size() == 4);
    CHECK(file.events[1].session_start);
    CHECK(file.events[1].step == 1);
    CHECK(file.events[2].step == 1);
    CHECK(file.events[3].step == 2);
  }
}

TEST_CASE("tensorboard: export_runs writes the files LiveExport wrote during the run (same scalars, steps, times)") {
  SyntheticStore fixture;
  expctl::test::TempDir live_out;
  expctl::test::TempDir export_out;
  for (int run = 0; run < 2; ++run) {
    const store::RunRecord& record = fixture.runs[static_cast<std::size_t>(run)];
    LiveExport live(live_out.path(), record.id, *store::parse_utc(record.started_at), {.world_size = k_ranks});
    feed(live, run);
    live.finish();
  }
  const auto exported = expctl::tensorboard::export_runs(fixture.db, fixture.runs, export_out.path());
  REQUIRE(exported.size() == 2);
  for (const store::RunRecord& record : fixture.runs) {
    for (const char* folder : {"rank0", "rank1", "job"}) {
      CAPTURE(record.id, folder);
      const auto live = scalars_in(live_out / record.id / folder);
      CHECK_FALSE(live.empty());
      CHECK(scalars_in(export_out / record.id / folder) == live);
    }
  }
}

TEST_CASE("tensorboard: export_runs refuses event files in the way (exit 2) and replaces them with overwrite") {
  SyntheticStore fixture;
  expctl::test::TempDir out;
  const auto first = expctl::tensorboard::export_runs(fixture.db, {fixture.runs[0]}, out.path());
  REQUIRE(first.size() == 1);
  CHECK(first[0].files.size() == 3);
  CHECK(first[0].points() == 7 * k_steps * 2 + 2 * (k_steps / k_eval_every) + 4 * k_steps);
  try {
    expctl::tensorboard::export_runs(fixture.db, fixture.runs, out.path());
    FAIL("no error");
  } catch (const expctl::tensorboard::ExportError& error) {
    CHECK(error.exit_code() == util::ExitCode::usage);
    CHECK_THAT(error.what(), Catch::Contains("--overwrite") && Catch::Contains(fixture.runs[0].id));
  }
  CHECK_FALSE(fs::exists(out / fixture.runs[1].id));  // nothing was written
  const auto again = expctl::tensorboard::export_runs(fixture.db, fixture.runs, out.path(), {.overwrite = true});
  CHECK(again.size() == 2);
  CHECK(event_files(out / fixture.runs[0].id / "rank0").size() == 1);
}

TEST_CASE("tensorboard: export_runs of a run without metrics writes nothing, a run given twice once") {
  SyntheticStore fixture;
  const auto empty = fixture.db.create_run({fixture.runs[0].spec_hash, std::nullopt, "empty", std::nullopt});
  expctl::test::TempDir out;
  const auto exported =
      expctl::tensorboard::export_runs(fixture.db, {empty, fixture.runs[0], fixture.runs[0]}, out.path());
  REQUIRE(exported.size() == 2);
  CHECK(exported[0].files.empty());
  CHECK(exported[0].points() == 0);
  CHECK_FALSE(fs::exists(out / empty.id));
  CHECK(exported[1].run_id == fixture.runs[0].id);
}

TEST_CASE("tensorboard: a crashed and resumed run, written live, shows in TensorBoard what its export shows") {
  SyntheticStore fixture;
  const store::RunRecord& run = fixture.runs[0];
  const std::int64_t checkpoint = 6;
  expctl::test::TempDir live_out;
  const auto batches = recorder_batches(0);
  {  // the first invocation gets to step 9, then dies (its steps after the checkpoint are redone)
    LiveExport first(live_out.path(), run, {.world_size = k_ranks});
    for (const auto& batch : batches) {
      if (batch.front().step <= 9) {
        first.on_points(batch);
      }
    }
  }
  {
    LiveExport resumed(live_out.path(), run, expctl::tensorboard::resumed_options(fixture.db, run.id, checkpoint, k_ranks));
    for (const auto& batch : batches) {
      if (batch.front().step > checkpoint) {
        resumed.on_points(batch);
      }
    }
    resumed.finish();
  }
  expctl::test::TempDir export_out;
  expctl::tensorboard::export_runs(fixture.db, {run}, export_out.path());
  for (const char* folder : {"rank0", "rank1", "job"}) {
    CAPTURE(folder);
    CHECK(event_files(live_out / run.id / folder).size() == 2);
    const auto exported = scalars_in(export_out / run.id / folder);
    CHECK_FALSE(exported.empty());  // two empty views would be equal too
    CHECK(tensorboard_view(live_out / run.id / folder) == exported);
  }
}
