// AMP: the autocast guard restores state and clears the cast cache like torch.autocast; the
// GradScaler skips steps with inf/NaN on any rank, backs off and grows like PyTorch's.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "expctl/train/amp.hpp"
#include "expctl/train/compat.hpp"
#include "expctl/train/datasets.hpp"
#include "expctl/train/ddp.hpp"
#include "expctl/train/determinism.hpp"
#include "expctl/train/models.hpp"
#include "expctl/train/optim.hpp"
#include "expctl/train/sampler.hpp"
#include "expctl/util/error.hpp"
#include "rank_helpers.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl::train;
using expctl::test::RankEnv;

// A leaf fp32 weight that requires grad: the only kind of tensor autocast caches.
torch::Tensor cached_weight() {
  return torch::ones({2, 3}).requires_grad_(true);
}

}  // namespace

TEST_CASE("autocast guard: enables bf16 on the CPU and restores the previous state", "[train][amp]") {
  const auto x = torch::ones({1, 3});
  const auto w = cached_weight();
  REQUIRE_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  const auto previous_dtype = compat::autocast_dtype(c10::DeviceType::CPU);
  {
    AutocastGuard guard(c10::DeviceType::CPU, at::kBFloat16, true, false);
    CHECK(compat::autocast_enabled(c10::DeviceType::CPU));
    CHECK_FALSE(at::autocast::is_autocast_cache_enabled());
    CHECK(torch::linear(x, w).scalar_type() == at::kBFloat16);
    {
      AutocastGuard off(c10::DeviceType::CPU, at::kBFloat16, false);
      CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
      CHECK(torch::linear(x, w).scalar_type() == at::kFloat);
    }
    CHECK(compat::autocast_enabled(c10::DeviceType::CPU));
  }
  CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  CHECK(compat::autocast_dtype(c10::DeviceType::CPU) == previous_dtype);
  CHECK(at::autocast::is_autocast_cache_enabled());
  CHECK(torch::linear(x, w).scalar_type() == at::kFloat);
}

TEST_CASE("autocast guard: the cast cache is cleared when the outermost scope ends", "[train][amp]") {
  const auto x = torch::ones({1, 3});
  auto w = cached_weight();
  const auto update = [&w] {
    torch::NoGradGuard no_grad;
    w.add_(1.0);
  };
  {
    AutocastGuard outer(c10::DeviceType::CPU, at::kBFloat16);
    const auto before = torch::linear(x, w);
    CHECK(before.sum().item<float>() == 6.0F);
    update();
    {
      AutocastGuard inner(c10::DeviceType::CPU, at::kBFloat16);
    }
    // The trap this guard exists for: inside one region the stale bf16 copy is still used, and
    // leaving an inner region must not clear the outer one's cache.
    CHECK(torch::linear(x, w).sum().item<float>() == 6.0F);
  }
  AutocastGuard next(c10::DeviceType::CPU, at::kBFloat16);
  CHECK(torch::linear(x, w).sum().item<float>() == 12.0F);  // fresh cast after the cache was cleared
}

TEST_CASE("autocast guard: a dtype the device cannot autocast to is an error that changes nothing",
          "[train][amp]") {
  // fp32 is refused on the CPU by every LibTorch: this part runs on each of them.
  CHECK_THROWS_WITH(AutocastGuard(c10::DeviceType::CPU, at::kFloat),
                    Catch::StartsWith("CPU autocast with this LibTorch (") && Catch::Contains("not Float"));
  CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  // fp16 on the CPU: refused by LibTorch 1.x, autocast (and restored afterwards) from 2.0 on.
  if (compat::k_cpu_autocast_fp16) {
    {
      AutocastGuard half(c10::DeviceType::CPU, at::kHalf);
      CHECK(compat::autocast_enabled(c10::DeviceType::CPU));
      CHECK(compat::autocast_dtype(c10::DeviceType::CPU) == at::kHalf);
    }
  } else {
    CHECK_THROWS_WITH(AutocastGuard(c10::DeviceType::CPU, at::kHalf),
                      Catch::StartsWith("CPU autocast with this LibTorch (") &&
                          Catch::EndsWith(") supports only bf16, not Half: set amp.dtype: bf16"));
  }
  CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  CHECK(parse_amp_dtype("bf16") == at::kBFloat16);
  CHECK_THROWS_WITH(parse_amp_dtype("fp8"), "unknown amp dtype \"fp8\": use bf16 or fp16");
}

namespace {

struct OneParam {
  torch::Tensor weight = torch::ones({3}).requires_grad_(true);
  torch::optim::SGD optimizer{{weight}, torch::optim::SGDOptions(1.0)};

  // Runs backward on sum(weight * values) scaled by `scaler`: the gradient is `values * scale`.
  void backward(GradScaler& scaler, const torch::Tensor& values) {
    optimizer.zero_grad();
    scaler.scale((weight * values).sum()).backward();
  }
};

}  // namespace

TEST_CASE("grad scaler: scales the loss, unscales exactly, steps on finite gradients", "[train][amp]") {
  GradScaler scaler;
  CHECK(scaler.get_scale() == 65536.0F);
  OneParam p;
  p.backward(scaler, torch::tensor({0.5F, -0.25F, 3.0F}));
  CHECK(torch::equal(p.weight.grad(), torch::tensor({32768.0F, -16384.0F, 196608.0F})));
  scaler.unscale(p.optimizer);
  CHECK(torch::equal(p.weight.grad(), torch::tensor({0.5F, -0.25F, 3.0F})));
  CHECK_THROWS_AS(scaler.unscale(p.optimizer), expctl::util::InternalError);
  CHECK(scaler.step(p.optimizer));
  scaler.update();
  CHECK(torch::equal(p.weight.detach(), torch::tensor({0.5F, 1.25F, -2.0F})));
  CHECK(scaler.growth_tracker() == 1);
}

TEST_CASE("grad scaler: an inf skips the step and halves the scale and it grows after the interval", "[train][amp]") {
  GradScalerOptions options;
  options.growth_interval = 3;
  GradScaler scaler(options);
  OneParam p;
  const auto finite = torch::tensor({1.0F, 1.0F, 1.0F});
  const auto infinite = torch::tensor({1.0F, std::numeric_limits<float>::infinity(), 1.0F});
  std::vector<float> scales;
  std::vector<bool> stepped;
  for (const auto& values : {finite, infinite, finite, finite, finite, finite}) {
    const auto before = p.weight.detach().clone();
    p.backward(scaler, values);
    stepped.push_back(scaler.step(p.optimizer));
    scaler.update();
    scales.push_back(scaler.get_scale());
    CHECK(torch::equal(before, p.weight.detach()) == !stepped.back());
  }
  CHECK(stepped == std::vector<bool>{true, false, true, true, true, true});
  CHECK(scales == std::vector<float>{65536.0F, 32768.0F, 32768.0F, 32768.0F, 65536.0F, 65536.0F});
}

TEST_CASE("grad scaler: growth stops at float32's range, NaN counts as overflow", "[train][amp]") {
  GradScalerOptions options;
  options.init_scale = 3.0e38;
  options.growth_interval = 1;
  GradScaler scaler(options);
  OneParam p;
  p.backward(scaler, torch::tensor({0.0F, 0.0F, 0.0F}));
  CHECK(scaler.step(p.optimizer));
  scaler.update();
  CHECK(scaler.get_scale() == static_cast<float>(3.0e38));  // 6e38 would be inf: kept
  p.backward(scaler, torch::tensor({std::nanf(""), 0.0F, 0.0F}));
  CHECK_FALSE(scaler.step(p.optimizer));
  scaler.update();
  CHECK(scaler.get_scale() == static_cast<float>(static_cast<double>(static_cast<float>(3.0e38)) * 0.5));
}

TEST_CASE("grad scaler: state survives a save/load round trip", "[train][amp]") {
  GradScalerOptions options;
  options.growth_interval = 7;
  options.init_scale = 1024.0;
  GradScaler scaler(options);
  OneParam p;
  for (int i = 0; i < 3; ++i) {
    p.backward(scaler, torch::ones({3}));
    scaler.step(p.optimizer);
    scaler.update();
  }
  expctl::test::TempDir dir;
  const auto path = (dir / "scaler.pt").string();
  torch::serialize::OutputArchive out;
  scaler.save(out);
  out.save_to(path);
  torch::serialize::InputArchive in;
  in.load_from(path);
  GradScaler restored;
  restored.load(in);
  CHECK(restored.get_scale() == 1024.0F);
  CHECK(restored.growth_tracker() == 3);
  CHECK(restored.state().options.growth_interval == 7);
  torch::serialize::InputArchive empty;
  torch::serialize::OutputArchive blank;
  blank.save_to((dir / "blank.pt").string());
  empty.load_from((dir / "blank.pt").string());
  CHECK_THROWS_WITH(restored.load(empty), "checkpoint has no \"grad_scaler/scale\": it was not written by this "
                                          "expctl's GradScaler");
}

TEST_CASE("grad scaler: invalid settings are rejected with the setting's name", "[train][amp]") {
  GradScalerOptions options;
  options.growth_factor = 1.0;
  CHECK_THROWS_WITH(GradScaler(options), "grad scaler growth_factor must be > 1, got 1");
  options = GradScalerOptions{};
  options.backoff_factor = 1.5;
  CHECK_THROWS_WITH(GradScaler(options), "grad scaler backoff_factor must be in (0, 1), got 1.5");
}

namespace {

// Five steps on two ranks, growth interval 2, init scale 1024:
//   step 1 clean; step 2 rank 1 alone gets an inf in its (already reduced) local gradient;
//   steps 3, 4 clean (growth); step 5 rank 1's loss is inf before backward (reaches rank 0 via SUM).
EXPCTL_RANK_SCENARIO("scaler_inf_one_rank") {
  torch::manual_seed(5);
  auto model = torch::nn::Linear(4, 2);
  Communicator comm(expctl::test::gloo_group(env));
  DistributedDataParallel ddp(*model, comm);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  GradScalerOptions options;
  options.init_scale = 1024.0;
  options.growth_interval = 2;
  GradScaler scaler(options);
  std::vector<float> record;
  for (int step = 1; step <= 5; ++step) {
    const auto before = model->weight.detach().clone();
    optimizer.zero_grad();
    auto loss = model(torch::ones({3, 4}) * (env.rank + 1)).pow(2).mean();
    if (step == 5 && env.rank == 1) {
      loss = loss * std::numeric_limits<float>::infinity();
    }
    scaler.scale(loss).backward();
    ddp.finish();
    if (step == 2 && env.rank == 1) {
      torch::NoGradGuard no_grad;
      model->bias.mutable_grad()[0] = std::numeric_limits<float>::infinity();
    }
    const bool stepped = scaler.step(optimizer, &comm);
    scaler.update();
    REQUIRE(torch::equal(before, model->weight.detach()) == !stepped);
    record.push_back(stepped ? 1.0F : 0.0F);
    record.push_back(scaler.get_scale());
  }
  torch::save(std::vector<torch::Tensor>{torch::tensor(record), model->weight.detach()},
              (env.dir / fmt::format("scaler{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("grad scaler: an inf on one rank skips the step on every rank and halves the scale",
          "[train][amp][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("scaler_inf_one_rank", 2, dir.path());
  std::vector<torch::Tensor> rank0;
  std::vector<torch::Tensor> rank1;
  torch::load(rank0, (dir / "scaler0.pt").string());
  torch::load(rank1, (dir / "scaler1.pt").string());
  // (stepped, scale) per step.
  const auto expected = torch::tensor({1.0F, 1024.0F, 0.0F, 512.0F, 1.0F, 512.0F, 1.0F, 1024.0F, 0.0F, 512.0F});
  CHECK(torch::equal(rank0[0], expected));
  CHECK(torch::equal(rank1[0], expected));
  CHECK(torch::equal(rank0[1], rank1[1]));
}

namespace {

// Everything together on two ranks: sampler shards, cnn under bf16 autocast, DDP with several
// buckets and accumulation, GradScaler, clipping after unscale, AdamW with a cosine schedule.
EXPCTL_RANK_SCENARIO("amp_ddp_cnn") {
  const auto data = make_synthetic(96, 3, {1, 8, 8}, 9, 0);
  seed_everything(derived_seed(17, static_cast<std::uint64_t>(env.rank)));  // DDP must unify
  ModelOptions model_options;
  model_options.kind = ModelKind::cnn;
  model_options.input_shape = {1, 8, 8};
  model_options.num_classes = 3;
  model_options.channels = {4, 8};
  model_options.dense = 16;
  auto model = make_model(model_options);
  Communicator comm(expctl::test::gloo_group(env));
  DdpOptions ddp_options;
  ddp_options.first_bucket_bytes = 512;
  ddp_options.bucket_cap_bytes = 2048;
  DistributedDataParallel ddp(*model, comm, ddp_options);
  OptimizerOptions optim;
  optim.kind = OptimizerKind::adamw;
  optim.lr = 0.01;
  auto optimizer = make_optimizer(model->parameters(), optim);
  ScheduleOptions schedule;
  schedule.kind = ScheduleKind::cosine;
  schedule.warmup_steps = 2;
  schedule.total_steps = 6;
  GradScaler scaler;
  DistributedSamplerOptions sampler_options;
  sampler_options.dataset_size = data.size();
  sampler_options.num_replicas = env.world_size;
  sampler_options.rank = env.rank;
  DistributedSampler sampler(sampler_options);
  const auto indices = sampler.indices();
  constexpr std::size_t micro = 4;
  constexpr int accum = 2;
  std::vector<float> losses;
  for (int step = 0; step < 6; ++step) {
    set_learning_rate(*optimizer, learning_rate_at(schedule, optim.lr, step));
    optimizer->zero_grad();
    for (int m = 0; m < accum; ++m) {
      const auto [x, y] = gather_batch(data, indices, static_cast<std::size_t>(step * accum + m) * micro, micro);
      at::Tensor loss;
      {
        AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
        loss = torch::cross_entropy_loss(model->forward(x), y);
      }
      REQUIRE(loss.scalar_type() == at::kFloat);  // autocast runs cross_entropy in fp32
      if (m + 1 < accum) {
        auto no_sync = ddp.no_sync();
        scaler.scale(loss / accum).backward();
      } else {
        scaler.scale(loss / accum).backward();
        ddp.finish();
      }
      losses.push_back(loss.item<float>());
    }
    scaler.unscale(*optimizer);
    clip_grad_norm(model->parameters(), 1.0);
    REQUIRE(scaler.step(*optimizer, &comm));
    scaler.update();
  }
  REQUIRE(ddp.allreduces_launched() == 6 * static_cast<std::int64_t>(ddp.bucket_assignment().size()));
  REQUIRE(ddp.bucket_assignment().size() >= 3);
  REQUIRE(comm.wait_seconds() > 0.0);  // the reducer waited for its all-reduces
  std::vector<torch::Tensor> out{torch::tensor(losses)};
  for (const auto& p : model->parameters()) {
    out.push_back(p.detach());
  }
  torch::save(out, (env.dir / fmt::format("amp{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("amp + ddp: bf16 autocast, scaler, clipping and accumulation keep replicas identical",
          "[train][amp][ddp][multiprocess]") {
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("amp_ddp_cnn", 2, dir.path());
  std::vector<torch::Tensor> rank0;
  std::vector<torch::Tensor> rank1;
  torch::load(rank0, (dir / "amp0.pt").string());
  torch::load(rank1, (dir / "amp1.pt").string());
  REQUIRE(rank0.size() == rank1.size());
  CHECK(torch::isfinite(rank0[0]).all().item<bool>());
  CHECK_FALSE(torch::equal(rank0[0], rank1[0]));  // each rank saw its own shard
  for (std::size_t i = 1; i < rank0.size(); ++i) {
    CHECK(torch::equal(rank0[i], rank1[i]));
  }
}
