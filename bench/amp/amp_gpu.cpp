// The AMP benchmark of issue 15 (scripts/gpu-check.sh runs it): one process trains the same wide
// model on the same synthetic batches three times on cuda:0 — fp32, autocast fp16 with expctl's
// GradScaler, autocast bf16 — and prints, per mode, samples/s (median per-step rate after the
// warm-up), peak GPU memory (the CUDA caching allocator's peak allocated bytes, minus the data
// the modes share) and the final loss, then the ratios to fp32 and whether the targets
// hold (AMP >= 1.8x fp32 samples/s, AMP peak <= 60 % of fp32's, final loss within 2 %). The final
// loss is the mean over the last 10 steps (the batches cycle through a pool of --pool).
//
//   expctl_amp_bench [--model mlp|cnn] [--batch N] [--steps N] [--warmup N] [--modes fp32,fp16,bf16]
//                    [--width W --depth D --features F]        (mlp)
//                    [--image S --channels C1,C2,... --dense W] (cnn, 3 x S x S inputs)
//                    [--lr X] [--seed N] [--pool N] [--device cuda|cpu] [--json FILE] [--require-targets]
//
// The model, autocast scope, GradScaler and optimizer are expctl's own (train/models, train/amp,
// train/optim): what `expctl run` with train.amp.enabled trains with, minus the process group.
// Without a CUDA device it prints "no CUDA device: skipped" and exits 0; `--device cpu` runs the
// modes the CPU supports (for trying the program out, not for figures).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "expctl/train/amp.hpp"
#include "expctl/train/compat.hpp"
#include "expctl/train/determinism.hpp"
#include "expctl/train/models.hpp"
#include "expctl/train/optim.hpp"

namespace {

using namespace expctl::train;

// The targets.
constexpr double k_target_speedup = 1.8;
constexpr double k_target_memory = 0.60;
constexpr double k_target_loss = 0.02;

struct Settings {
  std::string model = "mlp";
  std::int64_t batch = 65536;
  std::int64_t steps = 60;
  std::int64_t warmup = 10;
  std::int64_t width = 2048;
  std::int64_t depth = 4;
  std::int64_t features = 1024;
  std::int64_t image = 64;
  std::vector<std::int64_t> channels = {64, 128, 256};
  std::int64_t dense = 1024;
  std::int64_t classes = 10;
  double lr = 0.1;
  std::uint64_t seed = 42;
  std::int64_t pool = 4;  // distinct batches, cycled
  std::vector<std::string> modes = {"fp32", "fp16", "bf16"};
  std::string device = "cuda";
  std::string json_path;
  bool require_targets = false;
};

struct Result {
  std::string mode;
  double samples_per_sec = 0.0;
  std::int64_t peak_bytes = -1;        // peak allocated during training, minus the shared data
  std::int64_t peak_total_bytes = -1;  // peak allocated, data included
  std::int64_t peak_reserved_bytes = -1;
  double first_loss = 0.0;  // mean over the first min(10, steps) steps
  double final_loss = 0.0;  // mean over the last min(10, steps) steps
  std::int64_t skipped = 0;
  double scale = 1.0;
  double seconds = 0.0;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) {
    if (!part.empty()) {
      parts.push_back(part);
    }
  }
  return parts;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--require-targets") {
      s.require_targets = true;
      continue;
    }
    if (key == "--help" || key == "-h") {
      std::cout << "usage: expctl_amp_bench [--model mlp|cnn] [--batch N] [--steps N] [--warmup N] "
                   "[--modes fp32,fp16,bf16] [--width W] [--depth D] [--features F] [--image S] "
                   "[--channels C1,C2] [--dense W] [--lr X] [--seed N] [--pool N] [--device cuda|cpu] "
                   "[--json FILE] [--require-targets]\n";
      std::exit(0);
    }
    if (i + 1 >= argc) {
      throw std::runtime_error("option " + key + " needs a value");
    }
    const std::string value = argv[++i];
    if (key == "--model") s.model = value;
    else if (key == "--batch") s.batch = std::stoll(value);
    else if (key == "--steps") s.steps = std::stoll(value);
    else if (key == "--warmup") s.warmup = std::stoll(value);
    else if (key == "--width") s.width = std::stoll(value);
    else if (key == "--depth") s.depth = std::stoll(value);
    else if (key == "--features") s.features = std::stoll(value);
    else if (key == "--image") s.image = std::stoll(value);
    else if (key == "--dense") s.dense = std::stoll(value);
    else if (key == "--lr") s.lr = std::stod(value);
    else if (key == "--seed") s.seed = std::stoull(value);
    else if (key == "--pool") s.pool = std::stoll(value);
    else if (key == "--device") s.device = value;
    else if (key == "--json") s.json_path = value;
    else if (key == "--modes") s.modes = split(value);
    else if (key == "--channels") {
      s.channels.clear();
      for (const auto& part : split(value)) {
        s.channels.push_back(std::stoll(part));
      }
    } else {
      throw std::runtime_error("unknown option " + key + " (see --help)");
    }
  }
  if (s.model != "mlp" && s.model != "cnn") {
    throw std::runtime_error("--model must be mlp or cnn");
  }
  if (s.steps <= s.warmup || s.batch <= 0 || s.pool <= 0) {
    throw std::runtime_error("need --steps > --warmup, --batch > 0 and --pool > 0");
  }
  for (const auto& mode : s.modes) {
    if (mode != "fp32" && mode != "fp16" && mode != "bf16") {
      throw std::runtime_error("unknown mode " + mode + " (fp32, fp16, bf16)");
    }
  }
  return s;
}

ModelOptions model_options(const Settings& s) {
  ModelOptions options;
  options.num_classes = s.classes;
  if (s.model == "mlp") {
    options.kind = ModelKind::mlp;
    options.input_shape = {s.features};
    options.hidden.assign(static_cast<std::size_t>(s.depth), s.width);
  } else {
    options.kind = ModelKind::cnn;
    options.input_shape = {3, s.image, s.image};
    options.channels = s.channels;
    options.dense = s.dense;
  }
  return options;
}

// A teacher-student task the model cannot solve exactly (labels are a noisy linear function of
// the inputs), so the loss stays well above 0 and a 2 % comparison of final losses means something.
std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> make_batches(const Settings& s, const ModelOptions& model,
                                                                         c10::Device device) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(s.seed);
  std::vector<std::int64_t> shape{s.batch};
  std::int64_t features = 1;
  for (const auto size : model.input_shape) {
    shape.push_back(size);
    features *= size;
  }
  const auto teacher = at::randn({features, s.classes}, generator) / std::sqrt(static_cast<double>(features)) * 3.0;
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> labels;
  for (std::int64_t b = 0; b < s.pool; ++b) {
    auto x = at::randn(shape, generator);
    const auto noise = at::randn({s.batch, s.classes}, generator);
    labels.push_back(at::argmax(x.reshape({s.batch, features}).matmul(teacher) + noise, 1).to(device));
    inputs.push_back(x.to(device));
  }
  return {inputs, labels};
}

void synchronize(c10::Device device) {
  if (device.is_cuda()) {
    torch::cuda::synchronize(device.index());
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0.0 : (n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0);
}

Result train_mode(const Settings& s, const std::string& mode, const ModelOptions& model_opts,
                  const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& labels, c10::Device device) {
  const bool autocast = mode != "fp32";
  const auto dtype = mode == "fp16" ? at::kHalf : at::kBFloat16;
  const int index = device.is_cuda() ? device.index() : 0;
  synchronize(device);
  const std::int64_t baseline = device.is_cuda() ? compat::cuda_memory(index).allocated : 0;
  if (device.is_cuda()) {
    compat::reset_cuda_peak_memory(index);
  }
  seed_everything(s.seed);  // identical initial weights in every mode
  auto model = make_model(model_opts);
  model->to(device);
  OptimizerOptions optim;
  optim.lr = s.lr;
  optim.momentum = 0.9;
  auto optimizer = make_optimizer(model->parameters(), optim);
  GradScalerOptions scaler_options;
  scaler_options.enabled = mode == "fp16";  // bf16 has fp32's range: no loss scaling (as in expctl's trainer)
  GradScaler scaler(scaler_options);
  std::vector<double> rates;
  std::vector<double> losses;
  Result result;
  result.mode = mode;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t step = 0; step < s.steps; ++step) {
    const auto& x = inputs[static_cast<std::size_t>(step % s.pool)];
    const auto& y = labels[static_cast<std::size_t>(step % s.pool)];
    synchronize(device);
    const auto begin = std::chrono::steady_clock::now();
    optimizer->zero_grad();
    at::Tensor loss;
    {
      std::optional<AutocastGuard> guard;
      if (autocast) {
        guard.emplace(device.type(), dtype);
      }
      loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();
    if (!scaler.step(*optimizer)) {
      result.skipped += 1;
    }
    scaler.update();
    const double value = loss.item<double>();  // synchronises, as expctl's trainer does per step
    synchronize(device);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    losses.push_back(value);
    if (step >= s.warmup) {
      rates.push_back(static_cast<double>(s.batch) / seconds);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.samples_per_sec = median(rates);
  const auto window = std::min<std::size_t>(10, losses.size());
  double head = 0.0;
  double tail = 0.0;
  for (std::size_t i = 0; i < window; ++i) {
    head += losses[i];
    tail += losses[losses.size() - window + i];
  }
  result.first_loss = head / static_cast<double>(window);
  result.final_loss = tail / static_cast<double>(window);
  result.scale = scaler.get_scale();
  if (device.is_cuda() && compat::k_have_cuda_memory_stats) {
    const auto memory = compat::cuda_memory(index);
    result.peak_total_bytes = memory.peak_allocated;
    result.peak_bytes = memory.peak_allocated - baseline;
    result.peak_reserved_bytes = memory.peak_reserved;
  }
  return result;
}

std::string mib(std::int64_t bytes) {
  return bytes < 0 ? "n/a" : fmt::format("{:.0f}", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string verdict(bool known, bool met) {
  return !known ? "unknown" : (met ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings s = parse(argc, argv);
    if (s.device == "cuda" && !torch::cuda::is_available()) {
      std::cout << "no CUDA device: skipped (LibTorch " << TORCH_VERSION
                << (compat::k_have_nccl ? ", a CUDA build" : ", a CPU build") << ")" << std::endl;
      return 0;
    }
    const c10::Device device = s.device == "cpu" ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, 0);
    set_deterministic(false);  // LibTorch's defaults: what a relaxed run measures
    const auto model_opts = model_options(s);
    const auto [inputs, labels] = make_batches(s, model_opts, device);
    {
      seed_everything(s.seed);
      const auto params = parameter_count(*make_model(model_opts));
      std::cout << fmt::format("amp benchmark: LibTorch {}, device {}, model {} ({:.1f} M parameters), batch {}, "
                               "{} steps ({} warm-up), SGD lr {} momentum 0.9",
                               TORCH_VERSION, device.str(), s.model, static_cast<double>(params) / 1e6, s.batch,
                               s.steps, s.warmup, s.lr)
                << std::endl;
    }
    std::vector<Result> results;
    for (const auto& mode : s.modes) {
      if (device.is_cpu() && mode == "fp16" && !compat::k_cpu_autocast_fp16) {
        std::cout << "fp16: skipped (CPU autocast of LibTorch " << TORCH_VERSION << " is bf16 only)" << std::endl;
        continue;
      }
      results.push_back(train_mode(s, mode, model_opts, inputs, labels, device));
      const auto& r = results.back();
      std::cout << fmt::format("{:<5} {:>12.0f} samples/s  peak {:>7} MiB (total {:>7} MiB, reserved {:>7} MiB)  "
                               "loss {:.4f} -> {:.5f}  skipped {}  scale {:g}  ({:.1f} s)",
                               r.mode, r.samples_per_sec, mib(r.peak_bytes), mib(r.peak_total_bytes),
                               mib(r.peak_reserved_bytes), r.first_loss, r.final_loss, r.skipped, r.scale, r.seconds)
                << std::endl;
      if (!(r.final_loss < 0.9 * r.first_loss)) {
        std::cout << "  note: the loss hardly fell in " << r.mode
                  << ": a comparison of final losses says little (raise --lr or --steps)" << std::endl;
      }
    }
    const Result* fp32 = nullptr;
    for (const auto& r : results) {
      if (r.mode == "fp32") {
        fp32 = &r;
      }
    }
    bool all_met = true;
    bool any_target = false;
    std::string json_modes;
    for (const auto& r : results) {
      json_modes += fmt::format("{}\"{}\": {{\"samples_per_sec\": {:.1f}, \"peak_bytes\": {}, \"peak_total_bytes\": {}, "
                                "\"peak_reserved_bytes\": {}, \"first_loss\": {:.6f}, \"final_loss\": {:.6f}, \"skipped_steps\": {}, "
                                "\"scale\": {}}}",
                                json_modes.empty() ? "" : ", ", r.mode, r.samples_per_sec, r.peak_bytes,
                                r.peak_total_bytes, r.peak_reserved_bytes, r.first_loss, r.final_loss, r.skipped, r.scale);
      if (fp32 == nullptr || r.mode == "fp32") {
        continue;
      }
      const double speedup = r.samples_per_sec / fp32->samples_per_sec;
      const bool memory_known = r.peak_bytes > 0 && fp32->peak_bytes > 0;
      const double memory = memory_known ? static_cast<double>(r.peak_bytes) / static_cast<double>(fp32->peak_bytes) : 0.0;
      const double loss = (r.final_loss - fp32->final_loss) / fp32->final_loss;
      const bool speed_met = speedup >= k_target_speedup;
      const bool memory_met = memory_known && memory <= k_target_memory;
      const bool loss_met = std::isfinite(loss) && std::abs(loss) <= k_target_loss;
      any_target = true;
      all_met = all_met && speed_met && memory_met && loss_met;
      std::cout << fmt::format("{} vs fp32: {:.2f}x samples/s (target >= {}x: {}), peak memory {} (target <= {:.0f} %: {}), "
                               "final loss {:+.2f} % (target within {:.0f} %: {})",
                               r.mode, speedup, k_target_speedup, verdict(true, speed_met),
                               memory_known ? fmt::format("{:.0f} %", 100.0 * memory) : "n/a", 100.0 * k_target_memory,
                               verdict(memory_known, memory_met), 100.0 * loss, 100.0 * k_target_loss,
                               verdict(true, loss_met))
                << std::endl;
    }
    const std::string json = fmt::format(
        "{{\"format\": \"expctl-amp-bench/1\", \"libtorch\": \"{}\", \"device\": \"{}\", \"model\": \"{}\", "
        "\"batch\": {}, \"steps\": {}, \"warmup\": {}, \"modes\": {{{}}}, \"targets_met\": {}}}",
        TORCH_VERSION, device.str(), s.model, s.batch, s.steps, s.warmup, json_modes,
        any_target ? (all_met ? "true" : "false") : "null");
    std::cout << json << std::endl;
    if (!s.json_path.empty()) {
      std::ofstream(s.json_path) << json << "\n";
    }
    if (s.require_targets && (!any_target || !all_met)) {
      std::cerr << "expctl_amp_bench: the issue's targets are not all met (--require-targets)" << std::endl;
      return 1;
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "expctl_amp_bench: error: " << error.what() << std::endl;
    return 2;
  }
}
