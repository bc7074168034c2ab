#include "expctl/run/train_options.hpp"

#include <fmt/format.h>

#include "expctl/util/error.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

std::vector<std::int64_t> int_list(const json& value) { return value.get<std::vector<std::int64_t>>(); }

train::DatasetOptions dataset_options(const json& spec) {
  const json& data = spec.at("data");
  train::DatasetOptions options;
  options.kind = train::parse_dataset_kind(data.at("dataset").get<std::string>());
  options.root = data.at("root").get<std::string>();
  options.normalize = data.at("normalize").get<bool>();
  options.synthetic_size = data.at("num_samples").get<std::int64_t>();
  options.synthetic_classes = data.at("num_classes").get<std::int64_t>();
  options.synthetic_shape = int_list(data.at("input_shape"));
  options.seed = spec.at("seed").get<std::uint64_t>();
  // Every key is read with at(): the resolved spec of a run recorded before a field existed was
  // migrated to today's format by its reader (spec/resolved_file.hpp), which holds the defaults
  // the trainer took for absent fields, one migration step per format version.
  options.train_inputs = data.at("train_inputs").get<std::string>();
  options.train_targets = data.at("train_targets").get<std::string>();
  options.eval_inputs = data.at("eval_inputs").get<std::string>();
  options.eval_targets = data.at("eval_targets").get<std::string>();
  options.block_size = data.at("block_size").get<std::int64_t>();
  options.train_dir = data.at("train_dir").get<std::string>();
  options.eval_dir = data.at("eval_dir").get<std::string>();
  const auto sides = int_list(data.at("image_size"));
  options.image.height = static_cast<std::uint32_t>(sides.at(0));
  options.image.width = static_cast<std::uint32_t>(sides.at(1));
  const auto per_channel = [&](const char* key, const std::vector<float>& fallback) {
    auto values = data.at(key).get<std::vector<float>>();  // empty: the dataset's own
    if (values.empty()) {
      values = fallback;
    }
    return values.size() == 1 ? std::vector<float>(3, values.front()) : values;
  };
  const auto defaults = train::default_normalization(options.kind);
  options.image.mean = per_channel("mean", defaults.mean);
  options.image.std = per_channel("std", defaults.std);
  if (!options.normalize) {
    options.image.mean = {0.0F, 0.0F, 0.0F};
    options.image.std = {1.0F, 1.0F, 1.0F};
  }
  const json& augment = data.at("augment");
  options.image.random_resized_crop = augment.at("random_resized_crop").get<bool>();
  options.image.crop_padding = augment.at("random_crop_padding").get<std::uint32_t>();
  options.image.hflip = augment.at("hflip").get<bool>();
  options.on_bad_image = train::parse_bad_image_policy(data.at("on_bad_image").get<std::string>());
  options.loader_threads = data.at("loader_threads").get<int>();
  options.prefetch_batches = data.at("prefetch_batches").get<std::int64_t>();
  options.batch_size = data.at("batch_size").get<std::int64_t>();
  return options;
}

train::ModelOptions model_options(const json& model) {
  train::ModelOptions options;
  options.kind = train::parse_model_kind(model.at("arch").get<std::string>());
  options.hidden = int_list(model.at("hidden_sizes"));
  options.channels = int_list(model.at("channels"));
  options.dense = model.at("dense").get<std::int64_t>();
  options.dropout = model.at("dropout").get<double>();
  options.file = model.at("file").get<std::string>();
  return options;
}

train::OptimizerOptions optimizer_options(const json& optim) {
  train::OptimizerOptions options;
  options.kind = train::parse_optimizer_kind(optim.at("name").get<std::string>());
  options.lr = optim.at("lr").get<double>();
  options.weight_decay = optim.at("weight_decay").get<double>();
  options.momentum = optim.at("momentum").get<double>();
  options.nesterov = optim.at("nesterov").get<bool>();
  const auto betas = optim.at("betas").get<std::vector<double>>();
  options.beta1 = betas.at(0);
  options.beta2 = betas.at(1);
  options.eps = optim.at("eps").get<double>();
  return options;
}

train::ScheduleOptions schedule_options(const json& schedule) {
  train::ScheduleOptions options;
  options.kind = train::parse_schedule_kind(schedule.at("name").get<std::string>());
  options.warmup_steps = schedule.at("warmup_steps").get<std::int64_t>();
  options.step_size = schedule.at("step_size").get<std::int64_t>();
  options.gamma = schedule.at("gamma").get<double>();
  options.min_lr = schedule.at("min_lr").get<double>();
  return options;
}

train::ProcessGroupOptions group_options(const json& distributed, const launch::RankIdentity& placement) {
  train::ProcessGroupOptions options;
  options.placement = placement;
  options.backend = train::parse_backend_request(distributed.at("backend").get<std::string>());
  // A run recorded before the field existed ran Gloo: its resolved.json's migration says "gloo".
  options.allreduce = train::parse_allreduce_request(distributed.at("allreduce").get<std::string>());
  options.timeout = std::chrono::seconds(distributed.at("timeout_s").get<std::int64_t>());
  return options;
}

train::DdpOptions ddp_options(const json& distributed) {
  train::DdpOptions options;
  options.bucket_cap_bytes =
      static_cast<std::int64_t>(distributed.at("bucket_cap_mb").get<double>() * 1024.0 * 1024.0);
  options.compression = train::parse_grad_compression(distributed.at("grad_compression").get<std::string>());
  options.powersgd_rank = distributed.at("powersgd_rank").get<std::int64_t>();
  options.powersgd_warmup_steps = distributed.at("powersgd_warmup_steps").get<std::int64_t>();
  return options;
}

void train_section(const json& train, train::TrainerConfig& config) {
  config.epochs = train.at("epochs").get<std::int64_t>();
  config.max_steps = train.at("max_steps").get<std::int64_t>();
  config.grad_accum_steps = train.at("grad_accum_steps").get<std::int64_t>();
  config.amp = train.at("amp").at("enabled").get<bool>();
  config.amp_dtype = train.at("amp").at("dtype").get<std::string>() == "fp16" ? train::AmpDtype::fp16
                                                                               : train::AmpDtype::bf16;
  config.grad_clip_norm = train.at("grad_clip_norm").get<double>();
  config.nonfinite = train::parse_nonfinite_policy(train.at("nonfinite").get<std::string>());
  config.loss = train::parse_loss_kind(train.at("loss").get<std::string>());
  config.eval_every = train.at("eval_every").get<std::int64_t>();
  config.checkpoint_every = train.at("checkpoint_every").get<std::int64_t>();
  config.checkpoint_every_s = train.at("checkpoint_every_s").get<double>();
}

train::TrainerConfig map_spec(const json& spec, const launch::RankIdentity& placement, const json& inputs) {
  const json& data = spec.at("data");
  train::TrainerConfig config;
  config.group = group_options(spec.at("distributed"), placement);
  config.seed = spec.at("seed").get<std::uint64_t>();
  config.strict_determinism = spec.at("determinism").get<std::string>() == "strict";
  config.data = dataset_options(spec);
  config.batch_size = data.at("batch_size").get<std::int64_t>();
  config.shuffle = data.at("shuffle").get<bool>();
  config.drop_last = data.at("drop_last").get<bool>();
  config.model = model_options(spec.at("model"));
  config.optim = optimizer_options(spec.at("optim"));
  config.schedule = schedule_options(spec.at("schedule"));
  train_section(spec.at("train"), config);
  config.ddp = ddp_options(spec.at("distributed"));
  config.log_every = spec.at("metrics").at("log_every").get<std::int64_t>();
  config.monitored_barrier_every = spec.at("distributed").at("monitored_barrier_every").get<std::int64_t>();
  if (inputs.is_object()) {
    config.input_digests = inputs.get<std::map<std::string, std::string>>();
  }
  return config;
}

}  // namespace

train::TrainerConfig train_options(const json& spec, const launch::RankIdentity& placement, const json& inputs) {
  try {
    return map_spec(spec, placement, inputs);
  } catch (const json::exception& error) {
    throw util::TrainError(fmt::format("the resolved spec handed to the rank is incomplete: {}", error.what()));
  }
}

}  // namespace expctl::run
