// The training loop: learns, is bitwise reproducible, and an interrupted run resumed from its
// checkpoint continues exactly as if it had never stopped.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "expctl/train/trainer.hpp"
#include "expctl/util/error.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl::train;

/// Records what the trainer reports; optionally asks it to stop after a given step.
struct RecordingSink : MetricSink {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::vector<CheckpointFile> checkpoints;
  std::atomic<bool> stop{false};
  std::int64_t stop_after = -1;
  void on_step(const StepMetrics& m) override {
    steps.push_back(m);
    if (m.step == stop_after) {
      stop = true;
    }
  }
  void on_eval(const EvalMetrics& m) override { evals.push_back(m); }
  void on_checkpoint(const CheckpointFile& file) override { checkpoints.push_back(file); }
};

TrainerConfig small_config(const std::filesystem::path& checkpoints, int rank = 0, int world = 1,
                           unsigned port = 0) {
  TrainerConfig config;
  config.group.placement.rank = rank;
  config.group.placement.world_size = world;
  config.group.placement.master_port = static_cast<std::uint16_t>(port != 0 ? port : pick_free_port());
  config.group.backend = BackendRequest::gloo;
  config.group.timeout = std::chrono::seconds(30);
  config.seed = 5;
  config.data.kind = DatasetKind::synthetic;
  config.data.synthetic_size = 256;
  config.data.synthetic_classes = 4;
  config.data.synthetic_shape = {1, 4, 4};
  config.batch_size = 16;
  config.model.hidden = {32};
  config.model.dropout = 0.1;  // exercises the RNG state in checkpoints
  config.optim.lr = 0.05;
  config.optim.momentum = 0.9;  // exercises the optimizer state in checkpoints
  config.schedule.kind = ScheduleKind::cosine;
  config.schedule.warmup_steps = 2;
  config.max_steps = 12;
  config.eval_every = 6;
  config.checkpoint_dir = checkpoints;
  return config;
}

/// A configuration whose loss stops being finite within a few steps.
TrainerConfig diverging_config(const std::filesystem::path& checkpoints, std::int64_t steps) {
  auto config = small_config(checkpoints);
  config.optim.lr = 1e6;
  config.optim.momentum = 0.99;
  config.schedule.kind = ScheduleKind::constant;
  config.schedule.warmup_steps = 0;
  config.max_steps = steps;
  return config;
}

std::vector<float> losses_of(const RecordingSink& sink) {
  std::vector<float> losses;
  for (const auto& step : sink.steps) {
    losses.push_back(static_cast<float>(step.loss));
  }
  return losses;
}

}  // namespace

TEST_CASE("trainer: learns the synthetic task and reports every step, eval and checkpoint", "[train][trainer]") {
  expctl::test::TempDir dir;
  auto config = small_config(dir.path());
  config.max_steps = 0;
  config.epochs = 3;  // 256 samples / 16 = 16 steps per epoch
  config.checkpoint_every = 6;
  RecordingSink sink;
  const auto result = run_training(config, sink);
  CHECK(result.steps == 48);
  CHECK_FALSE(result.interrupted);
  REQUIRE(sink.steps.size() == 48);
  CHECK(sink.steps.back().epoch == 2);
  CHECK(sink.steps[0].lr == Approx(0.025));  // warm-up: half of 0.05 at the first step
  CHECK(sink.steps.back().loss < sink.steps.front().loss);
  CHECK(sink.evals.size() == 8);  // every 6 steps
  REQUIRE(result.final_eval.has_value());
  CHECK(result.final_eval->accuracy.value() > 0.8);
  REQUIRE(sink.checkpoints.size() == 8);  // every 6 steps but the last, plus the final one
  CHECK(sink.checkpoints.back().path == dir / "rank0-step48.pt");
  CHECK(sink.checkpoints.back().step == 48);
  CHECK(sink.checkpoints.back().sha256.size() == 64);
  // Only the two newest are kept, each with its index.
  const auto kept = list_checkpoints(dir.path(), 0);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].step == 48);
  CHECK(kept[1].step == 42);
  CHECK(verify_checkpoint(kept[0]).empty());
  CHECK_FALSE(std::filesystem::exists(dir / "rank0-step36.pt"));
}

TEST_CASE("trainer: the same config twice gives bitwise identical losses", "[train][trainer]") {
  expctl::test::TempDir dir;
  RecordingSink first;
  RecordingSink second;
  run_training(small_config(dir.path()), first);
  run_training(small_config(dir.path()), second);
  REQUIRE_FALSE(losses_of(first).empty());  // two empty lists would be equal too
  CHECK(losses_of(first) == losses_of(second));
}

TEST_CASE("trainer: an interrupted run resumed from its checkpoint equals an uninterrupted one",
          "[train][trainer]") {
  expctl::test::TempDir dir;
  RecordingSink whole;
  run_training(small_config(dir / "whole"), whole);

  RecordingSink interrupted;
  interrupted.stop_after = 5;
  const auto part = run_training(small_config(dir / "part"), interrupted, &interrupted.stop);
  CHECK(part.interrupted);
  CHECK(part.steps == 5);
  RecordingSink resumed;
  auto config = small_config(dir / "part");
  config.resume = true;
  const auto rest = run_training(config, resumed);
  CHECK(rest.steps == 12);
  CHECK(resumed.steps.front().step == 6);
  auto joined = losses_of(interrupted);
  const auto tail = losses_of(resumed);
  joined.insert(joined.end(), tail.begin(), tail.end());
  CHECK(joined == losses_of(whole));
  CHECK(rest.final_eval->accuracy == whole.evals.back().accuracy);
}

TEST_CASE("trainer: a resume without any checkpoint starts at step 1 and an epoch without a step is an error",
          "[train][trainer]") {
  expctl::test::TempDir dir;
  auto config = small_config(dir / "none");
  config.resume = true;
  config.max_steps = 3;
  RecordingSink sink;
  run_training(config, sink);
  REQUIRE_FALSE(sink.steps.empty());
  CHECK(sink.steps.front().step == 1);
  config = small_config(dir.path());
  config.batch_size = 200;
  config.grad_accum_steps = 3;  // 2 micro-batches per epoch
  CHECK_THROWS_WITH(steps_per_epoch(config, 256, 1),
                    "an epoch has no complete optimizer step: 256 samples per rank, batch_size 200 x "
                    "grad_accum_steps 3");
}

TEST_CASE("trainer: a corrupt newest checkpoint is passed over and a corrupt only one is refused naming the file",
          "[train][trainer]") {
  expctl::test::TempDir dir;
  RecordingSink whole;
  run_training(small_config(dir / "whole"), whole);
  RecordingSink part;
  part.stop_after = 4;
  auto config = small_config(dir / "part");
  config.checkpoint_every = 2;
  run_training(config, part, &part.stop);  // checkpoints at steps 2 and 4
  {
    std::fstream file(dir / "part" / "rank0-step4.pt", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x5a');  // one flipped byte
  }
  RecordingSink resumed;
  config.resume = true;
  run_training(config, resumed);
  REQUIRE_FALSE(resumed.steps.empty());
  CHECK(resumed.steps.front().step == 3);  // from step 2, the newest intact checkpoint
  CHECK(losses_of(resumed).back() == losses_of(whole).back());

  std::filesystem::remove(dir / "part" / "rank0-step12.pt");
  std::filesystem::remove(dir / "part" / "rank0-step12.json");
  for (const auto& file : list_checkpoints(dir / "part", 0)) {
    std::ofstream(file.path, std::ios::binary | std::ios::app) << "garbage";
  }
  RecordingSink refused;
  CHECK_THROWS_WITH(run_training(config, refused),
                    Catch::Contains("no checkpoint step is intact on every rank") && Catch::Contains("rank0-step"));
}

TEST_CASE("trainer: a non-finite loss ends training as diverged after recording the step", "[train][trainer]") {
  expctl::test::TempDir dir;
  auto config = diverging_config(dir.path(), 50);
  RecordingSink sink;
  try {
    run_training(config, sink);
    FAIL("training with lr 1e6 did not diverge");
  } catch (const DivergedError& error) {
    REQUIRE_FALSE(sink.steps.empty());
    CHECK(error.step() == sink.steps.back().step);
    CHECK_FALSE(std::isfinite(sink.steps.back().loss));
    CHECK(std::string(error.what()).find("train.nonfinite=skip") != std::string::npos);
    for (std::size_t i = 0; i + 1 < sink.steps.size(); ++i) {
      CHECK(std::isfinite(sink.steps[i].loss));
    }
  }
}

TEST_CASE("trainer: with nonfinite=skip a non-finite step is skipped and training goes on", "[train][trainer]") {
  expctl::test::TempDir dir;
  auto config = diverging_config(dir.path(), 30);
  config.nonfinite = NonFinitePolicy::skip;
  RecordingSink sink;
  // Fewer than k_max_consecutive_skips steps remain, so skipping never turns into divergence here.
  const auto result = run_training(config, sink);
  CHECK(result.steps == 30);
  std::int64_t skipped = 0;
  for (const auto& step : sink.steps) {
    skipped += step.skipped && !std::isfinite(step.loss) ? 1 : 0;
  }
  CHECK(skipped > 0);
}

namespace {

EXPCTL_RANK_SCENARIO("trainer_two_ranks") {
  auto config = small_config(env.dir / fmt::format("ckpt{}", env.rank), env.rank, env.world_size, env.master_port);
  config.group.placement.rendezvous_file = env.rendezvous_file().string();
  config.amp = true;
  config.grad_accum_steps = 2;
  config.batch_size = 8;
  config.grad_clip_norm = 1.0;
  RecordingSink sink;
  const auto result = run_training(config, sink);
  REQUIRE(result.steps == 12);
  REQUIRE(result.final_eval.has_value());
  torch::save(std::vector<torch::Tensor>{torch::tensor({result.final_eval->loss, result.final_eval->accuracy.value()}),
                                         torch::tensor(result.losses)},
              (env.dir / fmt::format("result{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("trainer: two ranks with bf16 autocast and accumulation agree on the evaluation",
          "[train][trainer][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("trainer_two_ranks", 2, dir.path());
  std::vector<torch::Tensor> rank0;
  std::vector<torch::Tensor> rank1;
  torch::load(rank0, (dir / "result0.pt").string());
  torch::load(rank1, (dir / "result1.pt").string());
  CHECK(torch::equal(rank0[0], rank1[0]));          // one evaluation of the whole test split
  CHECK_FALSE(torch::equal(rank0[1], rank1[1]));    // each rank's own shard losses
  CHECK(torch::isfinite(rank0[1]).all().item<bool>());
}
