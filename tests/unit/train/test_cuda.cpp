// The CUDA and NCCL paths (issue 15): autocast on the GPU, the GradScaler's fused kernels and its
// agreement across ranks, NCCL collectives, strict determinism and bit-exact resume on a GPU, and
// the GPU facts of the fingerprint. Every case checks first for what it needs (a CUDA device, a
// LibTorch with NCCL) and otherwise calls test::skip ("SKIPPED, not passed: ..."), which ctest
// reports as skipped (tests/CMakeLists.txt); these are the tests labelled `cuda`.
// scripts/gpu-check.sh builds and runs them on a GPU machine (docs/gpu.md).
#include <torch/script.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "expctl/env/fingerprint.hpp"
#include "expctl/train/amp.hpp"
#include "expctl/train/compat.hpp"
#include "expctl/train/ddp.hpp"
#include "expctl/train/determinism.hpp"
#include "expctl/train/model.hpp"
#include "expctl/train/process_group.hpp"
#include "expctl/train/torch_info.hpp"
#include "expctl/train/trainer.hpp"
#include "expctl/util/error.hpp"
#include "rank_launcher.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl::train;
using expctl::test::RankEnv;

const c10::Device k_gpu(c10::kCUDA, 0);

// True (after a visible skip) when there is no CUDA device.
bool skip_without_cuda() {
  if (torch::cuda::is_available()) {
    return false;
  }
  expctl::test::skip("cuda", std::string("no CUDA device (torch::cuda::is_available() is false; LibTorch ") +
                                 TORCH_VERSION +
                                 (compat::k_have_nccl ? ", built with CUDA and NCCL)" : ", a CPU build)"));
  return true;
}

// True (after a visible skip) without a CUDA device or without NCCL in this LibTorch.
bool skip_without_nccl() {
  if (skip_without_cuda()) {
    return true;
  }
  if (!compat::k_have_nccl) {
    expctl::test::skip("nccl",
                       std::string("this LibTorch (") + TORCH_VERSION + ") has CUDA but no NCCL (USE_C10D_NCCL)");
    return true;
  }
  return false;
}

int gpu_count() {
  return static_cast<int>(torch::cuda::device_count());
}

// One rank of a group on the GPU: NCCL with one GPU per rank when there are enough GPUs, else
// Gloo with CUDA tensors (several ranks on one GPU; NCCL refuses two ranks on one device).
ProcessGroupOptions gpu_group(const RankEnv& env) {
  ProcessGroupOptions options;
  options.placement.rank = env.rank;
  options.placement.world_size = env.world_size;
  options.placement.local_rank = env.rank;
  options.placement.local_world_size = env.world_size;
  options.placement.master_port = static_cast<std::uint16_t>(env.master_port);
  const bool nccl = compat::k_have_nccl && gpu_count() >= env.world_size;
  options.backend = nccl ? BackendRequest::nccl : BackendRequest::gloo;
  options.timeout = std::chrono::seconds(60);
  return options;
}

c10::Device rank_gpu(const RankEnv& env) {
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.rank % std::max(1, gpu_count())));
}

}  // namespace

// Needs no GPU, so it runs (and can fail) everywhere. PyTorch's wheels (2.5 on) export the
// std::filesystem they link statically (pytorch#133437); a program that links LibTorch directly
// and finds that copy before libstdc++'s crashes in it: with 2.11 on an H200, two of these cases
// crashed in remove_all when their temporary folder was removed. expctl_train_torch puts
// libstdc++ first among the program's libraries; this checks which copy the program really uses.
TEST_CASE("link order: std::filesystem comes from libstdc++, not from a copy inside LibTorch", "[cuda][link]") {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  using CreateDirectories = bool (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  const CreateDirectories create_directories = &std::filesystem::create_directories;
  for (void* function : {reinterpret_cast<void*>(remove_all), reinterpret_cast<void*>(create_directories)}) {
    Dl_info info{};
    REQUIRE(::dladdr(function, &info) != 0);
    INFO("defined in " << info.dli_fname);
    CHECK(std::string(info.dli_fname).find("libstdc++") != std::string::npos);
  }
}

TEST_CASE("cuda autocast: fp16 and bf16 where autocast lowers, fp32 where it keeps, state restored",
          "[cuda][amp]") {
  if (skip_without_cuda()) {
    return;
  }
  torch::manual_seed(1);
  const auto x = torch::randn({4, 8}, k_gpu);
  const auto w = torch::randn({3, 8}, k_gpu).requires_grad_(true);
  const auto labels = torch::tensor({0, 1, 2, 1}, torch::TensorOptions().dtype(torch::kLong).device(k_gpu));
  REQUIRE_FALSE(compat::autocast_enabled(c10::DeviceType::CUDA));
  const auto previous_dtype = compat::autocast_dtype(c10::DeviceType::CUDA);
  for (const auto dtype : {at::kHalf, at::kBFloat16}) {
    INFO("autocast dtype " << c10::toString(dtype));
    {
      AutocastGuard guard(c10::DeviceType::CUDA, dtype);
      CHECK(compat::autocast_enabled(c10::DeviceType::CUDA));
      CHECK(compat::autocast_dtype(c10::DeviceType::CUDA) == dtype);
      CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));  // one device type per guard
      const auto logits = torch::linear(x, w);
      CHECK(logits.scalar_type() == dtype);           // matmuls are lowered
      CHECK(torch::relu(logits).scalar_type() == dtype);  // elementwise ops follow their input
      const auto loss = torch::nn::functional::cross_entropy(logits, labels);
      CHECK(loss.scalar_type() == at::kFloat);        // losses run in fp32
      CHECK(torch::linear(x.cpu(), w.detach().cpu()).scalar_type() == at::kFloat);  // CPU untouched
      loss.backward();
      CHECK(w.grad().scalar_type() == at::kFloat);    // gradients of fp32 leaves stay fp32
      w.mutable_grad().reset();
    }
    CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CUDA));
    CHECK(compat::autocast_dtype(c10::DeviceType::CUDA) == previous_dtype);
    CHECK(torch::linear(x, w).scalar_type() == at::kFloat);
  }
  CHECK_THROWS_WITH(AutocastGuard(c10::DeviceType::CUDA, at::kFloat),
                    "CUDA autocast supports fp16 and bf16, not Float");
  CHECK_FALSE(compat::autocast_enabled(c10::DeviceType::CUDA));
}

TEST_CASE("cuda autocast: reaches the operators of a scripted module (fp16 and bf16), with fusion off as AMP sets it",
          "[cuda][amp]") {
  if (skip_without_cuda()) {
    return;
  }
  // A scripted module built and saved from C++ (no Python on a GPU machine), loaded the way a
  // user's model.pt is: through load_torchscript and the Model interface.
  expctl::test::TempDir dir;
  {
    torch::jit::Module module("Scripted");
    module.register_parameter("weight", torch::randn({3, 8}), false);
    module.define(R"(
def forward(self, x):
    return torch.relu(torch.nn.functional.linear(x, self.weight)) * 2.0 + 1.0
)");
    module.save((dir.path() / "scripted.pt").string());
  }
  auto model = expctl::train::load_torchscript(dir.path() / "scripted.pt");
  model->to(k_gpu);
  expctl::train::apply_jit_policy(*expctl::train::jit_policy(expctl::train::ModelKind::torchscript, true));
  const auto x = torch::randn({4, 8}, k_gpu);
  for (int round = 0; round < 3; ++round) {  // the profiling executor optimises after its first runs
    CHECK(model->forward(x).scalar_type() == at::kFloat);
    for (const auto dtype : {at::kHalf, at::kBFloat16}) {
      INFO("autocast dtype " << c10::toString(dtype) << ", round " << round);
      AutocastGuard guard(c10::DeviceType::CUDA, dtype);
      CHECK(model->forward(x).scalar_type() == dtype);
    }
  }
}

TEST_CASE("cuda grad scaler: fused unscale on the GPU, an inf skips the step and halves the scale",
          "[cuda][amp]") {
  if (skip_without_cuda()) {
    return;
  }
  GradScalerOptions options;
  options.growth_interval = 3;
  GradScaler scaler(options);
  auto weight = torch::ones({3}, k_gpu).requires_grad_(true);
  torch::optim::SGD optimizer({weight}, torch::optim::SGDOptions(1.0));
  const auto backward = [&](const torch::Tensor& values) {
    optimizer.zero_grad();
    scaler.scale((weight * values.to(k_gpu)).sum()).backward();
  };
  // Exact unscale: the gradient is values * 65536, divided back by the fp32 reciprocal.
  backward(torch::tensor({0.5F, -0.25F, 3.0F}));
  CHECK(torch::equal(weight.grad().cpu(), torch::tensor({32768.0F, -16384.0F, 196608.0F})));
  scaler.unscale(optimizer);
  CHECK(torch::equal(weight.grad().cpu(), torch::tensor({0.5F, -0.25F, 3.0F})));
  CHECK(scaler.step(optimizer));
  scaler.update();
  CHECK(torch::equal(weight.detach().cpu(), torch::tensor({0.5F, 1.25F, -2.0F})));
  // Then: inf (skip, halve), three clean steps (growth after the interval), NaN (skip, halve).
  const auto finite = torch::tensor({1.0F, 1.0F, 1.0F});
  const auto inf = torch::tensor({1.0F, std::numeric_limits<float>::infinity(), 1.0F});
  const auto nan = torch::tensor({std::nanf(""), 1.0F, 1.0F});
  std::vector<bool> stepped;
  std::vector<float> scales;
  for (const auto& values : {inf, finite, finite, finite, nan}) {
    const auto before = weight.detach().clone();
    backward(values);
    stepped.push_back(scaler.step(optimizer));
    scaler.update();
    scales.push_back(scaler.get_scale());
    CHECK(torch::equal(before, weight.detach()) == !stepped.back());
  }
  CHECK(stepped == std::vector<bool>{false, true, true, true, false});
  CHECK(scales == std::vector<float>{32768.0F, 32768.0F, 32768.0F, 65536.0F, 32768.0F});
}

namespace {

// Two ranks, a model on the GPU, growth interval 2, init scale 1024: step 2 rank 1 alone gets an
// inf in its (already reduced) local gradient; step 5 rank 1's loss is inf before backward.
EXPCTL_RANK_SCENARIO("cuda_scaler_inf_one_rank") {
  const auto device = rank_gpu(env);
  torch::manual_seed(5);
  auto model = torch::nn::Linear(4, 2);
  model->to(device);
  Communicator comm(gpu_group(env));
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
    auto loss = model(torch::ones({3, 4}, device) * (env.rank + 1)).pow(2).mean();
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
  torch::save(std::vector<torch::Tensor>{torch::tensor(record), model->weight.detach().cpu(),
                                         torch::tensor({comm.backend() == Backend::nccl ? 1 : 0})},
              (env.dir / fmt::format("scaler{}.pt", env.rank)).string());
}

}  // namespace

TEST_CASE("cuda grad scaler: an inf on one rank skips the step on every rank and halves the scale",
          "[cuda][amp][multiprocess]") {
  if (skip_without_cuda()) {
    return;
  }
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("cuda_scaler_inf_one_rank", 2, dir.path());
  std::vector<torch::Tensor> rank0;
  std::vector<torch::Tensor> rank1;
  torch::load(rank0, (dir / "scaler0.pt").string());
  torch::load(rank1, (dir / "scaler1.pt").string());
  // (stepped, scale) per step.
  const auto expected = torch::tensor({1.0F, 1024.0F, 0.0F, 512.0F, 1.0F, 512.0F, 1.0F, 1024.0F, 0.0F, 512.0F});
  CHECK(torch::equal(rank0[0], expected));
  CHECK(torch::equal(rank1[0], expected));
  CHECK(torch::equal(rank0[1], rank1[1]));
  if (rank0[2].item<int>() == 0) {
    WARN("the two ranks shared one GPU through Gloo (NCCL needs one GPU per rank; "
         << gpu_count() << " GPU(s) here, " << (compat::k_have_nccl ? "NCCL built in" : "no NCCL") << ")");
  }
}

namespace {

// SUM all-reduce, broadcast from rank 1, all-gather and a barrier over NCCL, one GPU per rank.
EXPCTL_RANK_SCENARIO("nccl_collectives") {
  Communicator comm(gpu_group(env));
  REQUIRE(comm.backend() == Backend::nccl);
  REQUIRE(comm.device() == rank_gpu(env));
  auto sum = torch::full({5}, static_cast<float>(env.rank + 1), comm.device());
  comm.allreduce(sum, "allreduce of the test tensor");
  REQUIRE(torch::equal(sum.cpu(), torch::full({5}, 3.0F)));
  auto from_one = torch::full({2}, static_cast<double>(10 * env.rank), torch::TensorOptions().dtype(at::kDouble).device(comm.device()));
  comm.broadcast(from_one, 1, "broadcast from rank 1");
  REQUIRE(torch::equal(from_one.cpu(), torch::full({2}, 10.0, at::kDouble)));
  const auto gathered = comm.allgather(torch::full({1}, env.rank, at::kLong), "allgather of ranks");
  REQUIRE(gathered.size() == 2);
  REQUIRE(gathered[1].cpu().item<std::int64_t>() == 1);
  comm.barrier("barrier at the end");
}

}  // namespace

TEST_CASE("nccl: all-reduce, broadcast, all-gather and barrier on the GPU", "[cuda][nccl]") {
  if (skip_without_nccl()) {
    return;
  }
  // One rank in this process: the NCCL communicator, its device and every collective kind.
  ProcessGroupOptions options;
  options.placement.master_port = pick_free_port();
  options.backend = BackendRequest::nccl;
  options.timeout = std::chrono::seconds(60);
  Communicator comm(options);
  CHECK(comm.backend() == Backend::nccl);
  CHECK(comm.device() == k_gpu);
  CHECK(resolve_backend(BackendRequest::auto_select) == Backend::nccl);
  auto tensor = torch::arange(6, torch::TensorOptions().dtype(at::kFloat).device(k_gpu));
  comm.allreduce(tensor, "allreduce of the test tensor");
  CHECK(torch::equal(tensor.cpu(), torch::arange(6, at::kFloat)));
  auto halves = tensor.to(at::kHalf);  // the fp16 gradient-compression wire format
  comm.allreduce(halves, "allreduce of a half tensor");
  CHECK(torch::equal(halves.cpu().to(at::kFloat), torch::arange(6, at::kFloat)));
  comm.broadcast(tensor, 0, "broadcast from rank 0");
  const auto gathered = comm.allgather(torch::ones({2}, at::kDouble), "allgather of ones");
  REQUIRE(gathered.size() == 1);
  CHECK(gathered[0].device() == k_gpu);
  comm.barrier("barrier");
  CHECK(comm.collectives_issued() == 5);
}

// Apart from the one-rank case above, so that a machine with one GPU reports this part as
// skipped instead of passing the whole case half-run.
TEST_CASE("nccl: two ranks on two GPUs all-reduce, broadcast, all-gather and meet at a barrier", "[cuda][nccl]") {
  if (skip_without_nccl()) {
    return;
  }
  // Two ranks need two GPUs (NCCL refuses two ranks on one device).
  if (gpu_count() < 2) {
    expctl::test::skip("gpus2", "the 2-rank NCCL case needs 2 GPUs, this machine has " + std::to_string(gpu_count()));
    return;
  }
  expctl::test::TempDir dir;
  expctl::test::run_ranks_successfully("nccl_collectives", 2, dir.path());
}

namespace {

struct CollectingSink : MetricSink {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  std::atomic<bool> stop{false};
  std::int64_t stop_after = -1;
  void on_step(const StepMetrics& m) override {
    steps.push_back(m);
    if (m.step == stop_after) {
      stop = true;
    }
  }
  void on_eval(const EvalMetrics& m) override { evals.push_back(m); }
  void on_checkpoint(const CheckpointFile& /*file*/) override {}
};

// The trainer runs on cuda:0 when its group is NCCL (the device is the communicator's).
TrainerConfig gpu_config(const std::filesystem::path& checkpoints, ModelKind kind) {
  TrainerConfig config;
  config.group.placement.master_port = pick_free_port();
  config.group.backend = BackendRequest::nccl;
  config.group.timeout = std::chrono::seconds(60);
  config.seed = 5;
  config.strict_determinism = true;
  config.data.kind = DatasetKind::synthetic;
  config.data.synthetic_size = 512;
  config.data.synthetic_classes = 4;
  config.data.synthetic_shape = {1, 8, 8};
  config.batch_size = 32;
  config.model.kind = kind;
  config.model.hidden = {64, 32};
  config.model.channels = {8, 16};
  config.model.dense = 32;
  config.model.dropout = 0.1;  // draws from the CUDA generator: its state must be checkpointed
  config.optim.lr = 0.05;
  config.optim.momentum = 0.9;
  config.schedule.kind = ScheduleKind::cosine;
  config.schedule.warmup_steps = 2;
  config.max_steps = 16;
  config.eval_every = 8;
  config.eval_batch_size = 100;
  config.checkpoint_dir = checkpoints;
  return config;
}

std::vector<float> losses_of(const CollectingSink& sink) {
  std::vector<float> losses;
  for (const auto& step : sink.steps) {
    losses.push_back(static_cast<float>(step.loss));
  }
  return losses;
}

const char* kind_name(ModelKind kind) {
  return kind == ModelKind::cnn ? "cnn" : "mlp";
}

// run_training, failing the test with the operation LibTorch names when strict determinism
// refuses one ("... does not have a deterministic implementation ...").
TrainResult train_or_name_the_op(const TrainerConfig& config, CollectingSink& sink,
                                 const std::atomic<bool>* stop = nullptr) {
  try {
    return run_training(config, sink, stop);
  } catch (const std::exception& error) {
    const std::string message = error.what();
    if (message.find("deterministic") != std::string::npos) {
      FAIL("strict determinism on CUDA refused an operation of the " << kind_name(config.model.kind)
                                                                     << ": " << message.substr(0, 600));
    }
    throw;
  }
}

}  // namespace

TEST_CASE("cuda determinism: strict mode gives bitwise identical reruns, or fails naming the op",
          "[cuda][determinism]") {
  if (skip_without_nccl()) {
    return;
  }
  expctl::test::TempDir dir;
  for (const auto kind : {ModelKind::mlp, ModelKind::cnn}) {
    for (const bool amp : {false, true}) {
      INFO("model " << kind_name(kind) << (amp ? ", amp fp16" : ", fp32"));
      auto config = gpu_config(dir / fmt::format("{}-{}", kind_name(kind), amp), kind);
      config.amp = amp;
      config.amp_dtype = AmpDtype::fp16;
      config.checkpoint_dir.clear();
      compat::reset_cuda_peak_memory(0);
      CollectingSink first;
      CollectingSink second;
      const auto a = train_or_name_the_op(config, first);
      config.group.placement.master_port = pick_free_port();
      const auto b = train_or_name_the_op(config, second);
      CHECK(std::getenv("CUBLAS_WORKSPACE_CONFIG") != nullptr);
      CHECK(at::globalContext().deterministicAlgorithms());
      REQUIRE(first.steps.size() == 16);
      CHECK(losses_of(first) == losses_of(second));
      REQUIRE(a.final_eval.has_value());
      REQUIRE(b.final_eval.has_value());
      CHECK(a.final_eval->loss == b.final_eval->loss);
      CHECK(first.steps.back().loss < first.steps.front().loss);
      if (compat::k_have_cuda_memory_stats) {
        CHECK(compat::cuda_memory(0).peak_allocated > 0);  // it did train on the GPU
      }
    }
  }
}

TEST_CASE("cuda checkpoint: an interrupted run resumed from its checkpoint equals an uninterrupted one, bit for bit",
          "[cuda][trainer]") {
  if (skip_without_nccl()) {
    return;
  }
  expctl::test::TempDir dir;
  for (const bool amp : {false, true}) {
    INFO((amp ? "amp fp16 (GradScaler state in the checkpoint)" : "fp32"));
    const auto name = std::string(amp ? "amp" : "fp32");
    CollectingSink whole;
    auto config = gpu_config(dir / (name + "-whole"), ModelKind::mlp);
    config.amp = amp;
    config.amp_dtype = AmpDtype::fp16;
    run_training(config, whole);

    CollectingSink interrupted;
    interrupted.stop_after = 7;
    config = gpu_config(dir / (name + "-part"), ModelKind::mlp);
    config.amp = amp;
    config.amp_dtype = AmpDtype::fp16;
    const auto part = run_training(config, interrupted, &interrupted.stop);
    CHECK(part.interrupted);
    CHECK(part.steps == 7);
    CollectingSink resumed;
    config.group.placement.master_port = pick_free_port();
    config.resume = true;
    const auto rest = run_training(config, resumed);
    CHECK(rest.steps == 16);
    REQUIRE_FALSE(resumed.steps.empty());
    CHECK(resumed.steps.front().step == 8);
    auto joined = losses_of(interrupted);
    const auto tail = losses_of(resumed);
    joined.insert(joined.end(), tail.begin(), tail.end());
    CHECK(joined == losses_of(whole));
    std::vector<double> scales_whole;
    std::vector<double> scales_joined;
    for (const auto& step : whole.steps) {
      scales_whole.push_back(step.grad_scale);
    }
    for (const auto* sink : {&interrupted, &resumed}) {
      for (const auto& step : sink->steps) {
        scales_joined.push_back(step.grad_scale);
      }
    }
    CHECK(scales_joined == scales_whole);
    REQUIRE(rest.final_eval.has_value());
    REQUIRE_FALSE(whole.evals.empty());
    CHECK(rest.final_eval->loss == whole.evals.back().loss);
    CHECK(rest.final_eval->accuracy == whole.evals.back().accuracy);
  }
}

TEST_CASE("cuda fingerprint: GPU name, driver, CUDA, cuDNN and NCCL versions are recorded", "[cuda][env]") {
  if (skip_without_cuda()) {
    return;
  }
  expctl::env::FingerprintOptions options;
  options.code_directory = expctl::test::source_dir();
  options.torch_fields = [] { return torch_build_fields(); };
  const auto fingerprint = expctl::env::collect_fingerprint(options);
  const auto text = [&fingerprint](const char* field) { return fingerprint.text(field); };
  INFO("gpu.models " << text("gpu.models") << ", driver " << text("gpu.driver_version") << ", CUDA driver "
                     << text("gpu.cuda_driver") << ", runtime " << text("gpu.cuda_runtime") << ", cuDNN "
                     << text("gpu.cudnn") << ", NCCL " << text("gpu.nccl") << ", source " << text("gpu.source")
                     << ", LibTorch " << text("software.libtorch_version") << " CUDA "
                     << text("software.libtorch_cuda") << " cuDNN " << text("software.libtorch_cudnn"));
  const auto* count = fingerprint.find("gpu.count");
  REQUIRE(count != nullptr);
  CHECK(count->get<std::int64_t>() == gpu_count());
  CHECK_FALSE(text("gpu.models").empty());
  CHECK(text("gpu.models").find("unknown") == std::string::npos);
  CHECK(text("gpu.source") == "nvml");
  CHECK(text("gpu.memory_mib") != "0");
  for (const char* field : {"gpu.driver_version", "gpu.cuda_driver", "gpu.cuda_runtime", "gpu.cudnn",
                            "software.libtorch_cuda", "software.libtorch_cudnn"}) {
    INFO(field);
    CHECK(text(field) != "none");
    CHECK(text(field) != "unknown");
  }
  if (compat::k_have_nccl) {
    CHECK(text("software.libtorch_nccl") == "ON");
    CHECK(text("gpu.nccl") != "none");
    CHECK(text("gpu.nccl") != "unknown");
  }
  // One line in the log of a GPU run, whatever the outcome.
  WARN("GPU facts: " << text("gpu.models") << " | driver " << text("gpu.driver_version") << " | CUDA "
                     << text("gpu.cuda_runtime") << " (driver supports " << text("gpu.cuda_driver") << ") | cuDNN "
                     << text("gpu.cudnn") << " | NCCL " << text("gpu.nccl"));
}
