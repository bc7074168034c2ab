// TorchScript models behind train::Model (train/torchscript_model.cpp), on files scripted by
// Debian's python3-torch (tests/tools/byo_fixtures.py).
#include <catch2/catch.hpp>

#include <sstream>

#include "expctl/train/amp.hpp"
#include "expctl/train/datasets.hpp"
#include "expctl/train/model.hpp"
#include "expctl/train/task.hpp"
#include "expctl/train/trainer.hpp"
#include "support/byo_fixtures.hpp"

using namespace expctl;
using namespace expctl::train;

TEST_CASE("torchscript: parameters and buffers in registration order, state saved and loaded in place") {
  const auto fixtures = test::byo_fixtures();
  auto model = load_torchscript(fixtures / "bn_cnn.pt");
  const auto parameters = model->parameters();
  REQUIRE(parameters.size() == 6);  // conv weight, bias, bn weight, bias, fc weight, bias
  CHECK(parameters[0].sizes() == at::IntArrayRef{8, 1, 3, 3});
  REQUIRE(model->buffers().size() == 3);  // bn running mean, var, num_batches_tracked
  const auto before = parameters[0].clone();

  torch::serialize::OutputArchive archive;
  model->save_state(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  {
    at::NoGradGuard no_grad;
    parameters[0].add_(1.0);
    model->buffers()[0].add_(3.0);
  }
  std::istringstream in(bytes.str());
  torch::serialize::InputArchive loaded;
  loaded.load_from(in);
  model->load_state(loaded);
  CHECK(at::equal(model->parameters()[0], before));
  CHECK(model->parameters()[0].data_ptr() == parameters[0].data_ptr());  // the same tensor: DDP hooks stay
  CHECK(model->buffers()[0].abs().max().item<float>() == 0.0F);
}

TEST_CASE("torchscript: autocast from C++ reaches the operators of a scripted module (CPU bf16)") {
  auto model = load_torchscript(test::byo_fixtures() / "cnn.pt");
  const auto images = at::randn({2, 1, 28, 28});
  CHECK(model->forward(images).scalar_type() == at::kFloat);
  {
    AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
    CHECK(model->forward(images).scalar_type() == at::kBFloat16);
  }
  CHECK(model->forward(images).scalar_type() == at::kFloat);
}

TEST_CASE("torchscript: the trainer sets the interpreter's switches it records: fusion off under AMP, built-ins untouched") {
  CHECK_FALSE(jit_policy(ModelKind::cnn, true).has_value());  // built-in models: no jit group in the fingerprint
  CHECK(jit_policy(ModelKind::torchscript, false) == JitPolicy{.profiling_executor = true, .tensorexpr_fuser = true});
  CHECK(jit_policy(ModelKind::torchscript, true) == JitPolicy{.profiling_executor = true, .tensorexpr_fuser = false});

  const auto fixtures = test::byo_fixtures();
  TrainerConfig config;
  config.model.kind = ModelKind::torchscript;
  config.model.file = fixtures / "cnn.pt";
  config.data.kind = DatasetKind::npy;
  config.data.train_inputs = fixtures / "fmnist-eval-x.npy";
  config.data.train_targets = fixtures / "fmnist-eval-y.npy";
  config.data.eval_inputs = config.data.train_inputs;
  config.data.eval_targets = config.data.train_targets;
  const auto before = current_jit_policy();
  // Whatever the process had before (LibTorch's defaults, or another tool's torch._C calls), the
  // preflight and the trainer leave what the policy says, each way round.
  for (const bool amp : {true, false, true}) {
    apply_jit_policy(JitPolicy{.profiling_executor = false, .tensorexpr_fuser = !amp});  // the opposite
    config.amp = amp;
    check_training(config);
    CHECK(current_jit_policy() == *jit_policy(ModelKind::torchscript, amp));
  }
  // A built-in model leaves the switches as they were.
  apply_jit_policy(before);
  config.model = ModelOptions{};
  config.model.kind = ModelKind::cnn;
  config.amp = true;
  check_training(config);
  CHECK(current_jit_policy() == before);
}

TEST_CASE("torchscript: dropout follows train/eval, a traced or frozen module and a pickle are refused") {
  const auto fixtures = test::byo_fixtures();
  auto model = load_torchscript(fixtures / "cnn_dropout.pt");
  const auto images = at::randn({4, 1, 28, 28});
  model->train(true);
  CHECK_FALSE(at::equal(model->forward(images), model->forward(images)));
  model->train(false);
  CHECK(at::equal(model->forward(images), model->forward(images)));
  CHECK_THROWS_WITH(load_torchscript(fixtures / "traced.pt"),
                    Catch::Contains("its train/eval mode is fixed in the file (aten::dropout has a constant mode"));
  CHECK_THROWS_WITH(load_torchscript(fixtures / "frozen.pt"), Catch::Contains("no trainable parameters"));
  CHECK_THROWS_WITH(load_torchscript(fixtures / "pickle.pt"), Catch::Contains("a torch.save file, not TorchScript"));
  CHECK_THROWS_WITH(load_torchscript(fixtures / "fmnist-train-y.npy"), Catch::Contains("not a TorchScript file"));
  CHECK_THROWS_WITH(load_torchscript(fixtures / "newer.pt"),
                    Catch::Contains("written by a newer PyTorch than this build's LibTorch"));
}

TEST_CASE("torchscript: the three losses, a model without its own loss says so") {
  const auto fixtures = test::byo_fixtures();
  auto classifier = load_torchscript(fixtures / "cnn.pt");
  const auto data = load_npy(fixtures / "fmnist-eval-x.npy", fixtures / "fmnist-eval-y.npy");
  CHECK(data.num_classes() == 10);
  const auto rows = at::arange(8, at::kLong);
  const auto inputs = data.rows(rows);
  const auto targets = data.labels.index_select(0, rows);
  const auto loss = Task(LossKind::cross_entropy).loss(*classifier, inputs, targets);
  CHECK(loss.dim() == 0);
  CHECK(std::isfinite(loss.item<double>()));
  EvalSums sums;
  Task(LossKind::cross_entropy).add_eval(*classifier, inputs, targets, sums);
  REQUIRE(sums.correct.has_value());
  CHECK(std::abs(sums.loss / 8 - loss.item<double>()) < 1e-5);
  CHECK_THROWS_WITH(Task(LossKind::model).loss(*classifier, inputs, targets),
                    Catch::Contains("computes outputs only: use train.loss cross_entropy or mse"));

  auto lossy = load_torchscript(fixtures / "lossy.pt");
  CHECK(Task(LossKind::model).loss(*lossy, inputs, targets).dim() == 0);

  auto regressor = load_torchscript(fixtures / "regressor.pt");
  const auto reg = load_npy(fixtures / "reg-eval-x.npy", fixtures / "reg-eval-y.npy");
  CHECK(reg.labels.scalar_type() == at::kFloat);
  EvalSums reg_sums;
  Task(LossKind::mse).add_eval(*regressor, reg.rows(rows), reg.labels.index_select(0, rows), reg_sums);
  CHECK_FALSE(reg_sums.correct.has_value());
  CHECK(reg_sums.loss > 0.0);
}

TEST_CASE("npy: uint8 inputs are scaled to [0, 1] per batch, float16 and float64 become float32") {
  const auto fixtures = test::byo_fixtures();
  const auto bytes = load_npy(fixtures / "fmnist-train-u8.npy", fixtures / "fmnist-train-y.npy");
  const auto floats = load_npy(fixtures / "fmnist-train-x.npy", fixtures / "fmnist-train-y.npy");
  const auto rows = at::arange(4, at::kLong);
  const auto scaled = bytes.rows(rows);
  CHECK(scaled.scalar_type() == at::kFloat);
  CHECK(scaled.max().item<float>() <= 1.0F);
  // The float file is (x / 255 - 0.2860) / 0.3530 of the same bytes.
  CHECK(at::allclose(floats.rows(rows), (scaled - 0.2860) / 0.3530, 1e-5, 1e-5));
  CHECK(bytes.size() == floats.size());
  CHECK(bytes.sample_shape() == std::vector<std::int64_t>{1, 28, 28});
}
