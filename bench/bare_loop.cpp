// The bare loop: Fashion-MNIST, one process, the same model shapes, loss, optimizer and batch as
// expctl's mlp/cnn, and nothing else (no process group, no reducer, no records, no sampler
// object). expctl at one rank is measured against it.
//   bare_loop --model mlp|cnn --steps N --batch 64 --lr 0.05 --momentum 0.9 --seed 42
// Prints one JSON line: {"samples_per_sec": median after warm-up, "steps": N, "final_loss": ...}.
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<std::uint8_t> read_gz(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw std::runtime_error(path + ": cannot open");
  }
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  int got = 0;
  while ((got = gzread(file, buffer, sizeof buffer)) > 0) {
    bytes.insert(bytes.end(), buffer, buffer + got);
  }
  gzclose(file);
  return bytes;
}

std::pair<torch::Tensor, torch::Tensor> load_train(const std::string& root) {
  const auto images = read_gz(root + "/train-images-idx3-ubyte.gz");
  const auto labels = read_gz(root + "/train-labels-idx1-ubyte.gz");
  const std::int64_t n = 60000;
  auto x = torch::from_blob(const_cast<std::uint8_t*>(images.data() + 16), {n, 1, 28, 28}, torch::kUInt8)
               .to(torch::kFloat32)
               .div_(255.0)
               .sub_(0.2860)
               .div_(0.3530);
  auto y = torch::from_blob(const_cast<std::uint8_t*>(labels.data() + 8), {n}, torch::kUInt8).to(torch::kInt64);
  return {x, y};
}

torch::nn::Sequential make_model(const std::string& kind) {
  if (kind == "mlp") {
    return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                                 torch::nn::Linear(256, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  }
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 5).padding(2)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 5).padding(2)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Flatten(), torch::nn::Linear(64 * 7 * 7, 10));
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_kind = "mlp";
  std::string root = "/usr/share/datasets/fashion-mnist";
  std::int64_t steps = 300;
  std::int64_t batch = 64;
  double lr = 0.05;
  double momentum = 0.9;
  std::int64_t seed = 42;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--model") model_kind = value;
    else if (key == "--root") root = value;
    else if (key == "--steps") steps = std::stoll(value);
    else if (key == "--batch") batch = std::stoll(value);
    else if (key == "--lr") lr = std::stod(value);
    else if (key == "--momentum") momentum = std::stod(value);
    else if (key == "--seed") seed = std::stoll(value);
  }
  torch::manual_seed(seed);
  const auto [images, labels] = load_train(root);
  auto model = make_model(model_kind);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr).momentum(momentum));
  auto order = torch::randperm(images.size(0), torch::kInt64);
  std::vector<double> rates;
  double loss_value = 0.0;
  const std::int64_t per_epoch = images.size(0) / batch;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const auto index = order.narrow(0, (step % per_epoch) * batch, batch);
    const auto x = images.index_select(0, index);
    const auto y = labels.index_select(0, index);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    optimizer.step();
    loss_value = loss.item<double>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(batch) / seconds);
  }
  // The same warm-up rule as expctl's summary: the first min(10, steps / 10) steps are left out.
  const auto warmup = std::min<std::int64_t>(10, steps / 10);
  std::vector<double> kept(rates.begin() + warmup, rates.end());
  std::sort(kept.begin(), kept.end());
  const std::size_t n = kept.size();
  const double median = n % 2 == 1 ? kept[n / 2] : (kept[n / 2 - 1] + kept[n / 2]) / 2.0;
  std::cout << "{\"samples_per_sec\": " << median << ", \"steps\": " << steps << ", \"final_loss\": " << loss_value
            << "}" << std::endl;
  return 0;
}
