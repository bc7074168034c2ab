#include "expctl/train/worker.hpp"

#include <chrono>

#include <fmt/format.h>

#include "expctl/train/trainer.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using nlohmann::json;

std::vector<std::int64_t> int_list(const json& value) { return value.get<std::vector<std::int64_t>>(); }

DatasetOptions dataset_options(const json& spec) {
  const json& data = spec.at("data");
  DatasetOptions options;
  options.kind = parse_dataset_kind(data.at("dataset").get<std::string>());
  options.root = data.at("root").get<std::string>();
  options.normalize = data.at("normalize").get<bool>();
  options.synthetic_size = data.at("num_samples").get<std::int64_t>();
  options.synthetic_classes = data.at("num_classes").get<std::int64_t>();
  options.synthetic_shape = int_list(data.at("input_shape"));
  options.seed = spec.at("seed").get<std::uint64_t>();
  return options;
}

ModelOptions model_options(const json& spec) {
  const json& model = spec.at("model");
  ModelOptions options;
  options.kind = parse_model_kind(model.at("arch").get<std::string>());
  options.hidden = int_list(model.at("hidden_sizes"));
  options.channels = int_list(model.at("channels"));
  options.dropout = model.at("dropout").get<double>();
  return options;
}

OptimizerOptions optimizer_options(const json& spec) {
  const json& optim = spec.at("optim");
  OptimizerOptions options;
  options.kind = parse_optimizer_kind(optim.at("name").get<std::string>());
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

ScheduleOptions schedule_options(const json& spec) {
  const json& schedule = spec.at("schedule");
  ScheduleOptions options;
  options.kind = parse_schedule_kind(schedule.at("name").get<std::string>());
  options.warmup_steps = schedule.at("warmup_steps").get<std::int64_t>();
  options.step_size = schedule.at("step_size").get<std::int64_t>();
  options.gamma = schedule.at("gamma").get<double>();
  options.min_lr = schedule.at("min_lr").get<double>();
  return options;
}

ProcessGroupOptions group_options(const json& spec, const WorkerPlacement& placement) {
  const json& distributed = spec.at("distributed");
  ProcessGroupOptions options;
  options.rank = placement.rank;
  options.world_size = placement.world_size;
  options.local_rank = placement.local_rank;
  options.master_addr = placement.master_addr;
  options.master_port = placement.master_port;
  options.store_hosted_by_launcher = placement.store_hosted_by_launcher;
  options.rendezvous_file = placement.rendezvous_file;
  options.backend = parse_backend_request(distributed.at("backend").get<std::string>());
  options.timeout = std::chrono::seconds(distributed.at("timeout_s").get<std::int64_t>());
  return options;
}

DdpOptions ddp_options(const json& spec) {
  const json& distributed = spec.at("distributed");
  DdpOptions options;
  options.bucket_cap_bytes =
      static_cast<std::int64_t>(distributed.at("bucket_cap_mb").get<double>() * 1024.0 * 1024.0);
  options.compression = parse_grad_compression(distributed.at("grad_compression").get<std::string>());
  return options;
}

// The spec -> trainer mapping: one field each, in spec order. The spec was validated already,
// so a missing key here is an internal error (json::out_of_range, reported by the caller).
TrainerConfig trainer_config(const WorkerRequest& request) {
  const json& spec = request.spec;
  const json& train = spec.at("train");
  TrainerConfig config;
  config.group = group_options(spec, request.placement);
  config.seed = spec.at("seed").get<std::uint64_t>();
  config.strict_determinism = spec.at("determinism").get<std::string>() == "strict";
  config.data = dataset_options(spec);
  config.batch_size = spec.at("data").at("batch_size").get<std::int64_t>();
  config.shuffle = spec.at("data").at("shuffle").get<bool>();
  config.drop_last = spec.at("data").at("drop_last").get<bool>();
  config.model = model_options(spec);
  config.optim = optimizer_options(spec);
  config.schedule = schedule_options(spec);
  config.epochs = train.at("epochs").get<std::int64_t>();
  config.max_steps = train.at("max_steps").get<std::int64_t>();
  config.grad_accum_steps = train.at("grad_accum_steps").get<std::int64_t>();
  config.amp = train.at("amp").at("enabled").get<bool>();
  config.amp_dtype = train.at("amp").at("dtype").get<std::string>() == "fp16" ? at::kHalf : at::kBFloat16;
  config.grad_clip_norm = train.at("grad_clip_norm").get<double>();
  config.eval_every = train.at("eval_every").get<std::int64_t>();
  config.checkpoint_every = train.at("checkpoint_every").get<std::int64_t>();
  config.ddp = ddp_options(spec);
  config.checkpoint_dir = request.checkpoint_dir;
  config.report_steps_from_rank = request.report_steps_from_rank;
  if (request.resume && !request.checkpoint_dir.empty()) {
    const auto file = request.checkpoint_dir / fmt::format("rank{}.pt", request.placement.rank);
    if (std::filesystem::exists(file)) {
      config.resume_from = file;
    }
  }
  return config;
}

/// Forwards the trainer's progress as records, and every log_every steps a line (rank 0).
class RecordingSink final : public MetricSink {
 public:
  RecordingSink(const RecordSink& on_record, const LineSink& on_line, int rank, int world_size,
                std::int64_t total_steps, std::int64_t log_every)
      : m_on_record(on_record),
        m_on_line(on_line),
        m_rank(rank),
        m_world_size(world_size),
        m_total_steps(total_steps),
        m_log_every(log_every) {}

  void on_step(const StepMetrics& m) override {
    m_on_record(json{{"t", "step"},
                     {"step", m.step},
                     {"epoch", m.epoch},
                     {"loss", m.loss},
                     {"lr", m.lr},
                     {"grad_scale", m.grad_scale},
                     {"skipped", m.skipped},
                     {"step_time_s", m.step_time_s},
                     {"comm_wait_s", m.comm_wait_s},
                     {"samples_per_sec", m.samples_per_sec}});
    if (m_rank == 0 && m_on_line && (m.step % m_log_every == 0 || m.step == m_total_steps)) {
      m_on_line(progress_line(m));
    }
  }

  void on_eval(const EvalMetrics& m) override {
    m_on_record(json{{"t", "eval"}, {"step", m.step}, {"loss", m.loss}, {"accuracy", m.accuracy}});
    if (m_rank == 0 && m_on_line) {
      m_on_line(fmt::format("eval step {} loss {:.4f} accuracy {:.4f}", m.step, m.loss, m.accuracy));
    }
  }

  // One record per rank and per block of steps: rows of [step, epoch, loss, lr, grad_scale,
  // skipped, step_time_s, comm_wait_s, samples_per_sec], each line a few hundred KB at most.
  void on_remote_steps(int rank, const std::vector<StepMetrics>& steps) override {
    constexpr std::size_t k_rows_per_record = 2048;
    for (std::size_t begin = 0; begin < steps.size(); begin += k_rows_per_record) {
      json rows = json::array();
      for (std::size_t i = begin; i < std::min(steps.size(), begin + k_rows_per_record); ++i) {
        const auto& m = steps[i];
        rows.push_back({m.step, m.epoch, m.loss, m.lr, m.grad_scale, m.skipped ? 1 : 0, m.step_time_s, m.comm_wait_s,
                        m.samples_per_sec});
      }
      m_on_record(json{{"t", "remote_steps"}, {"rank", rank}, {"rows", std::move(rows)}});
    }
  }

  void on_checkpoint(const std::filesystem::path& path, const std::string& sha256) override {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    m_on_record(json{{"t", "checkpoint"},
                     {"path", path.string()},
                     {"sha256", sha256},
                     {"size_bytes", error ? 0 : static_cast<std::int64_t>(size)}});
  }

 private:
  std::string progress_line(const StepMetrics& m) {
    // A moving average over the steps since the last line: one slow step must not swing the ETA.
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = m_last_line ? std::chrono::duration<double>(now - *m_last_line).count() : 0.0;
    const std::int64_t steps = m.step - m_last_step;
    const double per_step = elapsed > 0.0 && steps > 0 ? elapsed / static_cast<double>(steps) : m.step_time_s;
    m_last_line = now;
    m_last_step = m.step;
    const double eta = per_step * static_cast<double>(std::max<std::int64_t>(0, m_total_steps - m.step));
    return fmt::format("step {}/{} epoch {} loss {:.4f} samples/s {:.0f} eta {}", m.step, m_total_steps, m.epoch,
                       m.loss, m.samples_per_sec * m_world_size, eta_text(eta));
  }

  const RecordSink& m_on_record;
  const LineSink& m_on_line;
  int m_rank;
  int m_world_size;
  std::int64_t m_total_steps;
  std::int64_t m_log_every;
  std::optional<std::chrono::steady_clock::time_point> m_last_line;
  std::int64_t m_last_step = 0;
};

}  // namespace

std::int64_t training_set_size(const json& spec) {
  const json& data = spec.at("data");
  switch (parse_dataset_kind(data.at("dataset").get<std::string>())) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      return 60000;
    case DatasetKind::cifar10:
      return 50000;
    case DatasetKind::synthetic:
      return data.at("num_samples").get<std::int64_t>();
  }
  return 0;
}

std::string eta_text(double seconds) {
  const auto total = static_cast<std::int64_t>(seconds + 0.5);
  if (total >= 3600) {
    return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
  }
  if (total >= 60) {
    return fmt::format("{}m{:02}s", total / 60, total % 60);
  }
  return fmt::format("{}s", total);
}

WorkerResult run_worker(const WorkerRequest& request, const RecordSink& on_record, const LineSink& on_line,
                        const std::atomic<bool>* stop) {
  TrainerConfig config;
  try {
    config = trainer_config(request);
  } catch (const json::exception& error) {
    throw util::TrainError(fmt::format("the resolved spec handed to the worker is incomplete: {}", error.what()));
  }
  const int world = request.placement.world_size;
  const std::int64_t per_epoch = steps_per_epoch(config, training_set_size(request.spec), world);
  const std::int64_t total = config.max_steps > 0 ? config.max_steps : config.epochs * per_epoch;
  on_record(json{{"t", "start"},
                 {"rank", request.placement.rank},
                 {"world_size", world},
                 {"total_steps", total},
                 {"steps_per_epoch", per_epoch},
                 {"resumed", !config.resume_from.empty()}});
  const std::int64_t log_every = std::max<std::int64_t>(1, request.spec.at("metrics").at("log_every").get<std::int64_t>());
  RecordingSink sink(on_record, on_line, request.placement.rank, world, total, log_every);
  const TrainResult result = run_training(config, sink, stop);
  WorkerResult outcome;
  outcome.steps = result.steps;
  outcome.interrupted = result.interrupted;
  outcome.final_train_loss = result.final_train_loss;
  if (result.final_eval) {
    outcome.eval_accuracy = result.final_eval->accuracy;
  }
  on_record(json{{"t", "end"},
                 {"steps", outcome.steps},
                 {"interrupted", outcome.interrupted},
                 {"final_train_loss", outcome.final_train_loss}});
  return outcome;
}

}  // namespace expctl::train
