// Models, optimizers, schedules and clipping.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "expctl/train/datasets.hpp"
#include "expctl/train/models.hpp"
#include "expctl/train/optim.hpp"
#include "expctl/util/error.hpp"

using namespace expctl::train;

TEST_CASE("models: mlp and cnn map Fashion-MNIST images to 10 logits", "[train][models]") {
  torch::manual_seed(0);
  ModelOptions options;
  auto mlp = make_model(options);
  CHECK(mlp->forward(torch::zeros({5, 1, 28, 28})).sizes() == torch::IntArrayRef{5, 10});
  CHECK(parameter_count(*mlp) == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  options.kind = ModelKind::cnn;
  auto cnn = make_model(options);
  CHECK(cnn->forward(torch::zeros({2, 1, 28, 28})).sizes() == torch::IntArrayRef{2, 10});
  CHECK(parameter_count(*cnn) == (25 * 32 + 32) + (32 * 25 * 64 + 64) + (64 * 7 * 7 * 10 + 10));
  options.dense = 100;
  options.channels = {8, 8, 8};
  options.input_shape = {3, 30, 30};  // 30 -> 15 -> 7 -> 3
  CHECK(parameter_count(*make_model(options)) ==
        (75 * 8 + 8) + 2 * (200 * 8 + 8) + (8 * 3 * 3 * 100 + 100) + (100 * 10 + 10));
  options.input_shape = {3, 4, 4};
  CHECK_THROWS_WITH(make_model(options), "cnn input 4x4 is too small for 3 2x2 poolings");
  options.input_shape = {12};
  CHECK_THROWS_WITH(make_model(options), "cnn needs an input shape [channels, height, width], got 1 dimension(s)");
  options.kind = ModelKind::mlp;
  CHECK(make_model(options)->forward(torch::zeros({2, 12})).sizes() == torch::IntArrayRef{2, 10});
  CHECK(parse_model_kind("cnn") == ModelKind::cnn);
  CHECK_THROWS_WITH(parse_model_kind("resnet"), "unknown model \"resnet\": use mlp, cnn or torchscript");
}

TEST_CASE("models: the same seed builds the same weights", "[train][models]") {
  ModelOptions options;
  options.kind = ModelKind::cnn;
  options.dense = 16;
  options.dropout = 0.5;
  torch::manual_seed(4);
  auto a = make_model(options);
  torch::manual_seed(4);
  auto b = make_model(options);
  const auto pa = a->parameters();
  const auto pb = b->parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    CHECK(torch::equal(pa[i], pb[i]));
  }
  // Dropout is active in training mode only.
  const auto x = torch::ones({4, 1, 28, 28});
  a->eval();
  CHECK(torch::equal(a->forward(x), a->forward(x)));
  a->train();
  CHECK_FALSE(torch::equal(a->forward(x), a->forward(x)));
}

TEST_CASE("schedules: warm-up, then constant, step or cosine", "[train][optim]") {
  ScheduleOptions s;
  s.warmup_steps = 4;
  CHECK(learning_rate_at(s, 0.8, 0) == Approx(0.2));
  CHECK(learning_rate_at(s, 0.8, 3) == Approx(0.8));
  CHECK(learning_rate_at(s, 0.8, 100) == Approx(0.8));
  s.kind = ScheduleKind::step;
  s.step_size = 10;
  s.gamma = 0.5;
  CHECK(learning_rate_at(s, 0.8, 4 + 9) == Approx(0.8));
  CHECK(learning_rate_at(s, 0.8, 4 + 10) == Approx(0.4));
  CHECK(learning_rate_at(s, 0.8, 4 + 25) == Approx(0.2));
  s.kind = ScheduleKind::cosine;
  s.total_steps = 104;
  s.min_lr = 0.1;
  CHECK(learning_rate_at(s, 0.8, 4) == Approx(0.8));
  CHECK(learning_rate_at(s, 0.8, 54) == Approx(0.45));
  CHECK(learning_rate_at(s, 0.8, 104) == Approx(0.1));
  CHECK(learning_rate_at(s, 0.8, 500) == Approx(0.1));
  CHECK_THROWS_WITH(parse_schedule_kind("linear"), "unknown lr schedule \"linear\": use constant, step or cosine");
}

TEST_CASE("optimizers: SGD with Nesterov momentum follows PyTorch's update rule", "[train][optim]") {
  auto w = torch::tensor({1.0F, -2.0F}).requires_grad_(true);
  OptimizerOptions options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.nesterov = true;
  auto optimizer = make_optimizer({w}, options);
  // Constant gradient g: buf1 = g, step1 = g + 0.9 g; buf2 = 0.9 g + g, step2 = g + 0.9 * 1.9 g.
  for (int i = 0; i < 2; ++i) {
    optimizer->zero_grad();
    (w * torch::tensor({1.0F, 2.0F})).sum().backward();
    optimizer->step();
  }
  const double moved = 0.1 * (1.9 + (1.0 + 0.9 * 1.9));
  CHECK(w[0].item<float>() == Approx(1.0 - moved));
  CHECK(w[1].item<float>() == Approx(-2.0 - 2.0 * moved));
  set_learning_rate(*optimizer, 0.5);
  CHECK(optimizer->param_groups()[0].options().get_lr() == 0.5);
  options.momentum = 0.0;
  CHECK_THROWS_WITH(make_optimizer({w}, options), "nesterov needs momentum > 0 (got momentum 0)");
  CHECK(parse_optimizer_kind("adamw") == OptimizerKind::adamw);
}

TEST_CASE("optimizers: AdamW's first step moves each weight by about lr", "[train][optim]") {
  auto w = torch::tensor({1.0F, -2.0F}).requires_grad_(true);
  OptimizerOptions options;
  options.kind = OptimizerKind::adamw;
  options.lr = 0.01;
  auto optimizer = make_optimizer({w}, options);
  (w * torch::tensor({3.0F, -5.0F})).sum().backward();
  optimizer->step();
  CHECK(w[0].item<float>() == Approx(1.0 - 0.01).epsilon(1e-4));
  CHECK(w[1].item<float>() == Approx(-2.0 + 0.01).epsilon(1e-4));
}

TEST_CASE("clipping: the global norm is returned and capped", "[train][optim]") {
  auto a = torch::zeros({1}).requires_grad_(true);
  auto b = torch::zeros({1}).requires_grad_(true);
  (a * 3.0 + b * 4.0).sum().backward();
  CHECK(clip_grad_norm({a, b}, 1.0) == Approx(5.0));
  CHECK(a.grad().item<float>() == Approx(0.6));
  CHECK(b.grad().item<float>() == Approx(0.8));
  CHECK(clip_grad_norm({a, b}, 10.0) == Approx(1.0));
  CHECK(a.grad().item<float>() == Approx(0.6));
}

TEST_CASE("models: the mlp learns the synthetic task", "[train][models]") {
  torch::manual_seed(1);
  const auto data = make_synthetic(512, 4, {1, 4, 4}, 3, 0);
  ModelOptions options;
  options.input_shape = {1, 4, 4};
  options.num_classes = 4;
  options.hidden = {32};
  auto model = make_model(options);
  OptimizerOptions optim;
  optim.lr = 0.05;
  optim.momentum = 0.9;
  auto optimizer = make_optimizer(model->parameters(), optim);
  const auto loss_now = [&] { return torch::cross_entropy_loss(model->forward(data.images), data.labels); };
  const double initial = loss_now().item<double>();
  for (int step = 0; step < 60; ++step) {
    optimizer->zero_grad();
    loss_now().backward();
    optimizer->step();
  }
  const auto accuracy = (model->forward(data.images).argmax(1) == data.labels).to(torch::kFloat).mean();
  CHECK(loss_now().item<double>() < 0.5 * initial);
  CHECK(accuracy.item<float>() > 0.9F);
}
