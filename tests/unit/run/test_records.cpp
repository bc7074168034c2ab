// The typed step record and its one codec; spec values -> typed train options; checkpoint files.
#include <cmath>
#include <fstream>
#include <limits>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/run/train_options.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/metric_sink.hpp"
#include "expctl/train/records.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/sha256.hpp"

using namespace expctl;

TEST_CASE("records: a step survives JSON and rows bit for bit, NaN and Inf included", "[run][records]") {
  train::StepMetrics step;
  step.step = 12;
  step.epoch = 1;
  step.loss = std::numeric_limits<double>::quiet_NaN();
  step.lr = 0.1 / 3.0;
  step.grad_scale = std::numeric_limits<double>::infinity();
  step.skipped = true;
  step.step_time_s = 0.0123456789;
  step.comm_wait_s = -std::numeric_limits<double>::infinity();
  step.samples_per_sec = 5432.1;
  const auto record = train::encode_step(step);
  CHECK(record.at("loss") == "nan");
  CHECK(record.at("grad_scale") == "inf");
  CHECK(record.at("comm_wait_s") == "-inf");
  const auto decoded = train::decode_step(nlohmann::json::parse(record.dump()));
  REQUIRE(decoded.has_value());
  CHECK(std::isnan(decoded->loss));
  CHECK(decoded->lr == step.lr);
  CHECK(decoded->grad_scale == step.grad_scale);
  CHECK(decoded->comm_wait_s == step.comm_wait_s);
  CHECK(decoded->skipped);
  CHECK(decoded->step == 12);
  const auto row = train::decode_row(nlohmann::json::parse(train::encode_row(step).dump()));
  REQUIRE(row.has_value());
  CHECK(row->step_time_s == step.step_time_s);
  CHECK(train::step_row(*row).size() == train::step_fields().size());
  CHECK_FALSE(train::decode_step(nlohmann::json{{"t", "step"}, {"step", 1}}).has_value());
  CHECK(std::isnan(*train::decode_number(nullptr)));  // older records wrote NaN as null
}

TEST_CASE("records: each typed record goes on the wire as the JSON object records.hpp documents", "[run][records]") {
  std::vector<std::string> lines;
  train::RecordEncoder encoder(3, [&lines](const nlohmann::json& record) { lines.push_back(record.dump()); });
  encoder.on_start({3, 4, 100, 25, true});
  encoder.on_collectives("shm");
  train::CheckpointFile checkpoint;
  checkpoint.rank = 3;
  checkpoint.step = 50;
  checkpoint.path = "/runs/r/checkpoints/rank3-step50.pt";
  checkpoint.sha256 = std::string(64, 'f');
  checkpoint.size_bytes = 4096;
  encoder.on_checkpoint(checkpoint);
  encoder.on_eval({50, 0.5, std::nullopt});
  encoder.on_skipped_images({"x.png"});
  encoder.on_remote_steps(5, std::vector<train::StepMetrics>(2049));  // 2048 rows per record at most
  encoder.on_end({100, false, std::numeric_limits<double>::quiet_NaN()});
  REQUIRE(lines.size() == 8);
  CHECK(lines[0] == R"({"rank":3,"resume":true,"steps_per_epoch":25,"t":"start","total_steps":100,"world_size":4})");
  CHECK(lines[1] == R"({"allreduce":"shm","rank":3,"t":"collectives"})");
  CHECK(lines[2] == R"({"path":"/runs/r/checkpoints/rank3-step50.pt","sha256":")" + std::string(64, 'f') +
                        R"(","size_bytes":4096,"step":50,"t":"checkpoint"})");
  CHECK(lines[3] == train::encode_eval({50, 0.5, std::nullopt}).dump());
  CHECK(lines[4] == R"({"files":["x.png"],"rank":3,"t":"skipped_images"})");
  const auto first = nlohmann::json::parse(lines[5]);
  CHECK(first.at("t") == "remote_steps");
  CHECK(first.at("rank") == 5);
  CHECK(first.at("rows").size() == 2048);
  CHECK(nlohmann::json::parse(lines[6]).at("rows").size() == 1);
  CHECK(lines[7] == R"({"final_train_loss":"nan","interrupted":false,"steps":100,"t":"end"})");
}

TEST_CASE("train options: the quick-start spec maps onto typed options", "[run][options]") {
  const auto spec = spec::load_spec(test::source_dir() / "experiments" / "tiny-synthetic.yaml", {});
  launch::RankIdentity placement;
  placement.rank = 1;
  placement.world_size = 2;
  const auto config = run::train_options(spec.values(), placement);
  CHECK(config.group.placement.rank == 1);
  CHECK(config.group.timeout == std::chrono::seconds(60));
  CHECK(config.data.kind == train::DatasetKind::synthetic);
  CHECK(config.data.synthetic_size == 2048);
  CHECK(config.batch_size == 16);
  CHECK(config.model.hidden == std::vector<std::int64_t>{32});
  CHECK(config.optim.lr == 0.05);
  CHECK(config.max_steps == 60);
  CHECK(config.nonfinite == train::NonFinitePolicy::fail);
  CHECK(config.log_every == 10);
  auto values = spec.values();
  values["train"].erase("max_steps");
  CHECK_THROWS_WITH(run::train_options(values, placement), Catch::Contains("resolved spec handed to the rank is incomplete"));
}

namespace {

void write_checkpoint(const std::filesystem::path& dir, int rank, std::int64_t step) {
  train::CheckpointFile file{rank, step, train::checkpoint_path(dir, rank, step), "", 0, ""};
  const std::string content = fmt::format("weights of rank {} at step {}", rank, step);
  REQUIRE(util::write_file_atomic(file.path, content).has_value());
  file.sha256 = util::sha256_hex(content);
  file.size_bytes = static_cast<std::int64_t>(content.size());
  train::write_checkpoint_index(file);
  train::prune_checkpoints(dir, rank);
}

}  // namespace

TEST_CASE("checkpoint files: the newest step intact on every rank is chosen, or the broken file named",
          "[run][checkpoints]") {
  test::TempDir dir;
  auto point = train::resume_point(dir.path(), {0, 1});
  CHECK_FALSE(point.step.has_value());
  CHECK(point.refusal.empty());  // nothing at all: start fresh
  CHECK(point.note.empty());
  for (const std::int64_t step : {10, 20, 30}) {
    write_checkpoint(dir.path(), 0, step);
  }
  point = train::resume_point(dir.path(), {0, 1});  // rank 1 ended during its first write
  CHECK_FALSE(point.step.has_value());
  CHECK(point.refusal.empty());
  CHECK_THAT(point.note, Catch::Contains("rank 1 holds no complete checkpoint") && Catch::Contains("step 0"));

  write_checkpoint(dir.path(), 1, 10);
  write_checkpoint(dir.path(), 1, 20);  // rank 1 was killed before writing step 30
  CHECK(train::list_checkpoints(dir.path(), 0).size() == train::k_checkpoints_kept);
  CHECK_FALSE(std::filesystem::exists(train::checkpoint_path(dir.path(), 0, 10)));
  point = train::resume_point(dir.path(), {0, 1});
  CHECK(point.step == 20);
  CHECK(point.refusal.empty());
  CHECK(point.note.empty());

  std::ofstream(train::checkpoint_path(dir.path(), 1, 20), std::ios::binary | std::ios::app) << "x";
  point = train::resume_point(dir.path(), {0, 1});  // rank 1's step 10 is intact, rank 0 no longer has it
  CHECK_FALSE(point.step.has_value());
  CHECK_THAT(point.refusal, Catch::Contains("rank0-step10.pt") && Catch::Contains("passed over") &&
                                Catch::Contains("rank1-step20.pt"));
}

TEST_CASE("checkpoint files: an index of the wrong shape is no index - never a crash", "[run][checkpoints]") {
  // Found by fuzz_checkpoint_index (fuzz/regressions/checkpoint_index/): a string rank or a
  // numeric run id threw nlohmann's type_error out of resume; a step of 1e300 was converted to an
  // integer (undefined behaviour).
  test::TempDir dir;
  write_checkpoint(dir.path(), 0, 10);
  const auto index = train::checkpoint_path(dir.path(), 0, 20).replace_extension(".json");
  std::ofstream(train::checkpoint_path(dir.path(), 0, 20)) << "x";
  for (const char* text : {R"({"run_id":"run","rank":"0","step":20,"sha256":"00","size_bytes":1})",
                           R"({"run_id":7,"rank":0,"step":20,"sha256":"00","size_bytes":1})",
                           R"({"rank":0,"step":1e300,"sha256":"00","size_bytes":1})",
                           R"({"rank":0,"step":20.5,"sha256":"00","size_bytes":1})",
                           R"({"rank":0,"step":20,"sha256":["00"],"size_bytes":1})",
                           R"({"rank":0,"step":20,"sha256":"00","size_bytes":18446744073709551615})"}) {
    CAPTURE(text);
    std::ofstream(index, std::ios::trunc) << text;
    const auto files = train::list_checkpoints(dir.path(), 0);
    REQUIRE(files.size() == 1);
    CHECK(files[0].step == 10);
    CHECK(train::resume_point(dir.path(), {0}).step == 10);
  }
  std::ofstream(index, std::ios::trunc) << R"({"rank":5,"step":20,"sha256":"00","size_bytes":1})";
  CHECK(train::list_checkpoints(dir.path(), 0).size() == 2);  // read, then refused by verify_checkpoint
  CHECK(train::resume_point(dir.path(), {0}).step == 10);
}

TEST_CASE("checkpoint files: an index that names no run or no rank is refused when a run verifies it",
          "[run][checkpoints]") {
  // Issue 49: nothing tells such a checkpoint from another run's or rank's copied into the folder.
  test::TempDir dir;
  const std::string run = "20261206-070000-0001";
  write_checkpoint(dir.path(), 0, 10);  // an index without "run_id", as written before indexes named runs
  auto point = train::resume_point(dir.path(), {0}, run);
  CHECK_FALSE(point.step.has_value());
  CHECK_THAT(point.refusal, Catch::Contains("rank0-step10.pt: its index rank0-step10.json names no run"));
  CHECK(train::resume_point(dir.path(), {0}).step == 10);  // no run to verify against: the old rule

  const auto index = train::checkpoint_path(dir.path(), 0, 10).replace_extension(".json");
  auto document = nlohmann::json::parse(util::read_file(index).value());
  document["run_id"] = run;
  document.erase("rank");
  std::ofstream(index, std::ios::trunc) << document.dump();
  point = train::resume_point(dir.path(), {0}, run);
  CHECK_FALSE(point.step.has_value());
  CHECK_THAT(point.refusal, Catch::Contains("rank0-step10.pt: its index rank0-step10.json names no rank"));

  document["rank"] = 0;
  std::ofstream(index, std::ios::trunc) << document.dump();
  CHECK(train::resume_point(dir.path(), {0}, run).step == 10);
  CHECK_THAT(train::resume_point(dir.path(), {0}, "20261206-070000-0002").refusal,
             Catch::Contains("written by run " + run + ", not by this run 20261206-070000-0002"));
}

TEST_CASE("records: an evaluation says how it ran under AMP, and a record without it reads as before",
          "[run][records]") {
  train::EvalMetrics eval{20, 0.25, 0.5};
  eval.precision = "bf16 autocast with gradients on";
  eval.fallback = "under bf16 autocast the model failed: RuntimeError: expected scalar type BFloat16 but found Float";
  const auto record = train::encode_eval(eval);
  CHECK(record.at("precision") == eval.precision);
  const auto back = train::decode_eval(record);
  REQUIRE(back.has_value());
  CHECK(back->precision == eval.precision);
  CHECK(back->fallback == eval.fallback);
  CHECK(back->accuracy == 0.5);
  // Without AMP neither key is sent; a precision of another type is no precision.
  CHECK_FALSE(train::encode_eval({20, 0.25, std::nullopt}).contains("precision"));
  auto odd = record;
  odd["precision"] = 3;
  REQUIRE(train::decode_eval(odd).has_value());
  CHECK(train::decode_eval(odd)->precision.empty());
}
