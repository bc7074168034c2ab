#include "expctl/train/checkpoint.hpp"

#include <fmt/ranges.h>
#include <torch/serialize.h>

#include <sstream>

#include "expctl/train/determinism.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

constexpr std::int64_t k_checkpoint_version = 1;

}  // namespace

std::string save_checkpoint(const std::filesystem::path& path, const Model& model,
                            const torch::optim::Optimizer& optimizer, const GradScaler& scaler,
                            const TrainingPosition& position) {
  torch::serialize::OutputArchive archive;
  archive.write("expctl/version", at::full({}, k_checkpoint_version, at::kLong));
  archive.write("expctl/step", at::full({}, position.step, at::kLong));
  archive.write("expctl/epoch", at::full({}, position.epoch, at::kLong));
  archive.write("expctl/cpu_rng_state", cpu_rng_state());
  // Only with CUDA devices, so CPU checkpoints keep their exact bytes; optional when loading.
  const auto cuda_states = cuda_rng_states();
  for (std::size_t device = 0; device < cuda_states.size(); ++device) {
    archive.write(fmt::format("expctl/cuda_rng_state/{}", device), cuda_states[device]);
  }
  torch::serialize::OutputArchive model_archive;
  model.save_state(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  scaler.save(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  const std::string content = bytes.str();
  std::error_code ignored;  // a failure shows up as the write's error below
  std::filesystem::create_directories(path.parent_path(), ignored);
  const auto written = util::write_file_atomic(path, content);
  EXPCTL_CHECK(written.has_value(), TrainError, "{}: cannot write checkpoint: {}", path.string(),
               written.has_value() ? "" : written.error().message);
  return util::sha256_hex(content);
}

TrainingPosition load_checkpoint(const std::filesystem::path& path, Model& model,
                                 torch::optim::Optimizer& optimizer, GradScaler& scaler) {
  EXPCTL_CHECK(std::filesystem::exists(path), TrainError, "{}: no such checkpoint", path.string());
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path.string());
  } catch (const c10::Error& error) {
    throw TrainError(fmt::format("{}: not a readable checkpoint ({})", path.string(),
                                 std::string(error.what_without_backtrace()).substr(0, 200)));
  }
  at::Tensor version;
  EXPCTL_CHECK(archive.try_read("expctl/version", version) && version.item<std::int64_t>() == k_checkpoint_version,
               TrainError, "{}: not an expctl checkpoint of version {}", path.string(), k_checkpoint_version);
  try {
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model.load_state(model_archive);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
  } catch (const c10::Error& error) {
    throw TrainError(fmt::format("{}: does not match this model or optimizer ({})", path.string(),
                                 std::string(error.what_without_backtrace()).substr(0, 200)));
  }
  scaler.load(archive);
  at::Tensor step;
  at::Tensor epoch;
  at::Tensor rng;
  archive.read("expctl/step", step);
  archive.read("expctl/epoch", epoch);
  archive.read("expctl/cpu_rng_state", rng);
  set_cpu_rng_state(rng);
  std::vector<at::Tensor> cuda_states;
  while (true) {
    at::Tensor state;  // a fresh one each time: try_read set_()s a defined tensor in place
    if (!archive.try_read(fmt::format("expctl/cuda_rng_state/{}", cuda_states.size()), state)) {
      break;
    }
    cuda_states.push_back(state);
  }
  set_cuda_rng_states(cuda_states);
  return TrainingPosition{step.item<std::int64_t>(), epoch.item<std::int64_t>()};
}

}  // namespace expctl::train
