// The bare loop: Fashion-MNIST, one process, the same model shapes, loss, optimizer and batch as
// expctl's mlp/cnn, and nothing else (no process group, no reducer, no records, no sampler
// object). expctl at one rank is measured against it.
//   bare_loop --model mlp|cnn --steps N --batch 64 --lr 0.05 --momentum 0.9 --seed 42
//             [--times FILE] [--pair]
// Prints one JSON line: {"samples_per_sec": median after warm-up, "steps": N, "final_loss": ...}.
// --times FILE: every step's seconds, one per line. With --pair each process writes FILE.<rank>,
// two columns a step: the seconds before the barrier (its own work) and the whole step.
// --pair: two such loops (two processes) that meet at a barrier after every step and exchange
// nothing. This is the synchronous-pair bound: what 2 ranks of any synchronous data-parallel
// trainer reach here when communication costs nothing. It falls below two independent loops when
// one core runs slower than the other, or either jitters, since each step waits for the slower.
// samples_per_sec is then the sum over both processes, as expctl's summary counts it.
#include <torch/torch.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <fstream>
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

// Shared by the two processes of --pair.
struct Pair {
  pthread_barrier_t barrier;
  double rate[2];
};

Pair* make_pair_area() {
  void* area = mmap(nullptr, sizeof(Pair), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) {
    throw std::runtime_error("cannot map the pair's barrier");
  }
  auto* pair = static_cast<Pair*>(area);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&pair->barrier, &attr, 2);
  return pair;
}

// The same warm-up rule as expctl's summary: the first min(10, steps / 10) steps are left out.
double median_rate(const std::vector<double>& rates, std::int64_t steps) {
  const auto warmup = std::min<std::int64_t>(10, steps / 10);
  std::vector<double> kept(rates.begin() + warmup, rates.end());
  std::sort(kept.begin(), kept.end());
  const std::size_t n = kept.size();
  return n % 2 == 1 ? kept[n / 2] : (kept[n / 2 - 1] + kept[n / 2]) / 2.0;
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
  std::string times_file;
  Pair* pair = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--pair") {
      pair = make_pair_area();
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string value = argv[++i];
    if (key == "--model") model_kind = value;
    else if (key == "--root") root = value;
    else if (key == "--steps") steps = std::stoll(value);
    else if (key == "--batch") batch = std::stoll(value);
    else if (key == "--lr") lr = std::stod(value);
    else if (key == "--momentum") momentum = std::stod(value);
    else if (key == "--seed") seed = std::stoll(value);
    else if (key == "--times") times_file = value;
  }
  int rank = 0;
  pid_t partner = -1;
  if (pair != nullptr) {
    partner = fork();  // before LibTorch has started any thread
    rank = partner == 0 ? 1 : 0;
    seed += rank;
  }
  torch::manual_seed(seed);
  const auto [images, labels] = load_train(root);
  auto model = make_model(model_kind);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr).momentum(momentum));
  auto order = torch::randperm(images.size(0), torch::kInt64);
  std::vector<double> rates;
  std::vector<double> own_seconds;
  double loss_value = 0.0;
  const std::int64_t per_epoch = images.size(0) / batch;
  if (pair != nullptr) {
    pthread_barrier_wait(&pair->barrier);  // both start their first step together
  }
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
    own_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (pair != nullptr) {
      pthread_barrier_wait(&pair->barrier);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(batch) / seconds);
  }
  if (!times_file.empty()) {
    std::ofstream out(pair == nullptr ? times_file : times_file + "." + std::to_string(rank));
    for (std::size_t i = 0; i < rates.size(); ++i) {
      if (pair != nullptr) out << own_seconds[i] << " ";
      out << static_cast<double>(batch) / rates[i] << "\n";
    }
  }
  double samples_per_sec = median_rate(rates, steps);
  if (pair != nullptr) {
    pair->rate[rank] = samples_per_sec;
    if (rank == 1) {
      _exit(0);
    }
    waitpid(partner, nullptr, 0);
    samples_per_sec = pair->rate[0] + pair->rate[1];
  }
  std::cout << "{\"samples_per_sec\": " << samples_per_sec << ", \"steps\": " << steps
            << ", \"final_loss\": " << loss_value << "}" << std::endl;
  return 0;
}
