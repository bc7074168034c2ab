#include "expctl/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/nn/functional/loss.h>

#include "expctl/launch/shm_segments.hpp"
#include "expctl/train/amp.hpp"
#include "expctl/train/checkpoint.hpp"
#include "expctl/train/checkpoint_files.hpp"
#include "expctl/train/determinism.hpp"
#include "expctl/train/image_folder_dataset.hpp"
#include "expctl/train/model_failure.hpp"
#include "expctl/train/sampler.hpp"
#include "expctl/train/task.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/file_digest.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/sandbox.hpp"

namespace expctl::train {
namespace {

using util::TrainError;
using Clock = std::chrono::steady_clock;

// Steps (after an invocation's first) whose pace turns train.checkpoint_every_s into a step interval:
// past the first step's start-up costs, and early enough that a short run gets its interval too.
constexpr std::int64_t k_checkpoint_pace_steps = 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds between successive laps: the phase timers of a step (a steady_clock read per phase
// and micro-batch, ~25 ns each).
class Stopwatch {
 public:
  double lap() {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - m_last).count();
    m_last = now;
    return seconds;
  }

 private:
  Clock::time_point m_last = Clock::now();
};

DistributedSamplerOptions sampler_options(const TrainerConfig& config, std::int64_t size, int world, int rank) {
  DistributedSamplerOptions options;
  options.dataset_size = size;
  options.num_replicas = world;
  options.rank = rank;
  options.shuffle = config.shuffle;
  options.seed = static_cast<std::int64_t>(config.seed);
  options.drop_last = config.drop_last;
  return options;
}

std::int64_t micro_batches(std::int64_t samples, std::int64_t batch, bool drop_last) {
  return drop_last ? samples / batch : (samples + batch - 1) / batch;
}

// The files the spec hash covers must be the ones the run was recorded with: a model or data file
// replaced since (between `expctl run`'s validation and this rank, or before a resume) would
// train something else under the same spec hash.
void verify_inputs(const TrainerConfig& config) {
  for (const auto& [path, expected] : config.input_digests) {
    // An image folder's digest covers its listing and every file (remembered by path, size, mtime
    // and inode: an unchanged folder costs a stat per file).
    const auto actual = std::filesystem::is_directory(path) ? util::index_image_folder(path).and_then(
                                                                  util::image_folder_digest)
                                                            : util::file_digest(path);
    EXPCTL_CHECK(actual.has_value(), TrainError, "{}", actual.has_value() ? "" : actual.error().message);
    EXPCTL_CHECK(*actual == expected, TrainError,
                 "{} changed since the run was recorded (SHA-256 {}... then, {}... now): restore the file, or "
                 "start a new run with `expctl run` (its content is part of the spec hash)",
                 path, expected.substr(0, 12), actual->substr(0, 12));
  }
}

// An exception's text without LibTorch's C++ backtrace (c10::Error keeps it apart).
std::string torch_error_text(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

// The most telling line of an error LibTorch raised inside a model: TorchScript's interpreter
// puts a traceback first and the error itself ("RuntimeError: mat1 and mat2 shapes ...") last.
std::string model_error_line(const std::string& what) {
  std::string last;
  std::size_t begin = 0;
  while (begin <= what.size()) {
    const auto end = std::min(what.find('\n', begin), what.size());
    const std::string line = what.substr(begin, end - begin);
    if (line.find_first_not_of(" \t") != std::string::npos) {
      last = line;
    }
    begin = end + 1;
  }
  return last;
}

std::unique_ptr<Dataset> load_split(const TrainerConfig& config, bool train, const at::Device& device) {
  if (train) {
    verify_inputs(config);  // before anything is read: the training split is loaded first
  }
  auto options = config.data;
  options.train = train;
  options.loader_threads = loader_threads_for(options, config.group.placement.local_world_size);
  auto dataset = load_dataset(options);
  dataset->move_to(device);
  if (config.loss == LossKind::cross_entropy) {
    EXPCTL_CHECK(dataset->class_targets(), TrainError,
                 "train.loss cross_entropy needs integer class targets, but the {} targets are floats: use "
                 "train.loss mse for regression",
                 train ? "training" : "evaluation");
  }
  return dataset;
}

// A model file is code: from here on this thread (and every thread it starts: the interpreter's
// forks, autograd's device threads) writes only where the run may. The process group's segments
// and the data are set up by now; NCCL makes its own /dev/shm segments at its first collective,
// and the single-node FileStore opens its file at every operation.
void enter_sandbox(const TrainerConfig& config, const at::Device& device) {
  auto writable = config.sandbox_writable;
  for (const auto& folder : {config.checkpoint_dir, config.artifact_dir}) {
    if (!folder.empty()) {
      writable.folders.push_back(folder);
    }
  }
  if (device.is_cuda()) {
    writable.folders.push_back(launch::shm_segment_directory());
  }
  if (const auto& file = config.group.placement.rendezvous_file; !file.empty()) {
    writable.files.emplace_back(file);  // c10d's FileStore opens it for every operation
  }
  (void)util::sandbox::restrict_writes(writable, config.sandbox);
}

std::unique_ptr<Model> build_model(const TrainerConfig& config, const Dataset& train, const Dataset& test,
                                   const at::Device& device) {
  if (const auto policy = jit_policy(config.model.kind, config.amp)) {
    apply_jit_policy(*policy);  // what the fingerprint's jit.* fields say (run/stack.cpp)
  }
  enter_sandbox(config, device);
  seed_everything(config.seed);  // identical initial weights everywhere (DDP broadcasts anyway)
  // Arrays may hold more classes in one split than in the other.
  const auto outputs =
      config.loss == LossKind::cross_entropy ? std::max(train.num_classes(), test.num_classes()) : train.num_classes();
  auto model = create_model(config.model, {train.sample_shape(), outputs});
  model->to(device);
  return model;
}

// One forward of two samples, in eval mode and without gradients (no state changes): inputs the
// model rejects, and class targets beyond its outputs, fail here with the model's own words
// instead of in the middle of a step (or silently, on a GPU).
void probe(Model& model, const Dataset& train, const Dataset& test, LossKind loss) {
  at::NoGradGuard no_grad;
  const auto count = std::min<std::int64_t>(2, train.size());
  const auto rows = at::arange(count, at::TensorOptions().dtype(at::kLong).device(train.device()));
  const auto inputs = train.inputs(rows);
  model.train(false);
  at::Tensor outputs;
  try {
    outputs = loss == LossKind::model ? model.forward_loss(inputs, train.targets(rows))
                                      : model.forward(inputs);
  } catch (const util::Failure&) {
    model.train(true);
    throw;  // ours already says what to do
  } catch (const std::exception& error) {  // c10::Error, or the TorchScript interpreter's JITException
    model.train(true);
    const std::string line = model_error_line(torch_error_text(error));
    if (const auto refused = util::sandbox::explain_refusal("the model", line); refused != line) {
      throw TrainError(fmt::format("{}: {}", model.describe(), refused));  // not the inputs' fault
    }
    throw TrainError(fmt::format("{} rejects the inputs (a batch of shape [{}], {}): {}", model.describe(),
                                 fmt::join(inputs.sizes(), ", "), c10::toString(inputs.scalar_type()), line));
  }
  model.train(true);
  if (loss == LossKind::cross_entropy) {
    const auto targets = train.targets(rows);
    EXPCTL_CHECK(outputs.dim() == targets.dim() + 1 && outputs.dim() >= 2 &&
                     outputs.sizes().slice(0, static_cast<std::size_t>(targets.dim())) == targets.sizes(),
                 TrainError,
                 "{} returns outputs of shape [{}] for targets of shape [{}]; train.loss cross_entropy needs logits "
                 "[batch, classes] for targets [batch], or [batch, T, classes] for targets [batch, T]",
                 model.describe(), fmt::join(outputs.sizes(), ", "), fmt::join(targets.sizes(), ", "));
    const auto top = std::max(train.largest_class(), test.largest_class());
    EXPCTL_CHECK(top < outputs.size(-1), TrainError,
                 "the targets name class {} but {} has {} outputs: the model needs one output per class (0 .. {})", top,
                 model.describe(), outputs.size(-1), top);
  }
}

// `call` is a call into the model: an exception of its own (anything but expctl's Failure)
// becomes a ModelError naming the model (`name()`), the phase and the step.
template <typename Name, typename Call>
decltype(auto) call_model(const Name& name, const char* phase, std::int64_t step, Call&& call) {
  try {
    return call();
  } catch (const util::Failure&) {
    throw;
  } catch (const std::exception& error) {
    auto parsed = parse_model_error(torch_error_text(error));
    parsed.message = util::sandbox::explain_refusal("the model", parsed.message);
    throw ModelError(model_failure_text(name(), phase, step, parsed));
  }
}

/// How an evaluation runs (Trainer::eval_sums): without AMP, plain fp32; under AMP, the first of
/// the others that works for the model.
enum class EvalMode { plain, autocast, autocast_with_grad, fp32 };

/// All state of one rank's run; one method per phase.
class Trainer {
 public:
  Trainer(const TrainerConfig& config, MetricSink& sink)
      : m_config(config),
        m_sink(sink),
        m_comm((set_deterministic(config.strict_determinism), config.group)),
        m_train(load_split(config, true, m_comm.device())),
        m_test(load_split(config, false, m_comm.device())),
        m_model(build_model(config, *m_train, *m_test, m_comm.device())),
        m_task(config.loss),
        m_ddp(m_model->parameters(), m_model->buffers(), m_comm, config.ddp),
        m_optimizer(make_optimizer(m_ddp.parameters(), config.optim)),
        m_scaler(scaler_options()),
        m_sampler(sampler_options(config, m_train->size(), m_comm.world_size(), m_comm.rank())),
        m_steps_per_epoch(steps_per_epoch(config, m_train->size(), m_comm.world_size())),
        m_total_steps(config.max_steps > 0 ? config.max_steps : config.epochs * m_steps_per_epoch) {
    m_schedule = config.schedule;
    m_schedule.total_steps = m_total_steps;
    m_eval_mode = config.amp ? EvalMode::autocast : EvalMode::plain;
    m_ddp.set_beacon(config.beacon);
    probe(*m_model, *m_train, *m_test, config.loss);
    m_sink.on_collectives(m_comm.allreduce_algorithm());
    // Dropout must differ between ranks (as with per-rank DataLoader workers), reproducibly.
    seed_everything(derived_seed(config.seed, static_cast<std::uint64_t>(m_comm.rank())));
    if (config.resume && !config.checkpoint_dir.empty()) {
      m_position = resume_position();
      m_checkpointed_step = m_position.step > 0 ? m_position.step : -1;
    }
  }

  TrainResult run(const std::atomic<bool>* stop) {
    TrainResult result;
    std::int64_t loaded_epoch = -1;
    while (m_position.step < m_total_steps) {
      m_position.epoch = m_position.step / m_steps_per_epoch;
      if (m_position.epoch != loaded_epoch) {
        m_sampler.set_epoch(m_position.epoch);
        m_indices = m_sampler.indices();
        loaded_epoch = m_position.epoch;
        // The rest of this epoch's shard, in the order the steps draw it (a resume starts inside it).
        const auto drawn = std::min(m_indices.size(), static_cast<std::size_t>((m_position.step % m_steps_per_epoch) *
                                                                               m_config.grad_accum_steps *
                                                                               m_config.batch_size));
        m_train->upcoming(m_position.epoch, {m_indices.begin() + static_cast<std::ptrdiff_t>(drawn), m_indices.end()});
      }
      const auto metrics = train_step(stop);
      if (m_nonfinite_now) {
        on_nonfinite(metrics);
      } else {
        m_consecutive_skips = 0;
      }
      if (m_config.report_steps_from_rank > 0) {
        m_history.push_back(metrics);
      }
      result.losses.push_back(static_cast<float>(metrics.loss));
      result.final_train_loss = metrics.loss;
      m_sink.on_step(metrics);
      after_step(result);
      if (stop_agreed(stop)) {
        result.interrupted = true;
        break;
      }
    }
    report_remote_steps();
    report_skipped();
    if (!result.interrupted && (!result.final_eval || result.final_eval->step != m_position.step)) {
      enter(Phase::eval);
      result.final_eval = evaluate();
    }
    if (!result.interrupted) {
      save_artifact(result);
    }
    enter(Phase::checkpoint);
    checkpoint();
    enter(Phase::finished);
    result.steps = m_position.step;
    return result;
  }

 private:
  // A call into the model, in `phase` of `step` (call_model). Defined before its uses: its return
  // type is deduced.
  template <typename Call>
  decltype(auto) model_call(const char* phase, std::int64_t step, Call&& call) const {
    return call_model([this] { return model_name(); }, phase, step, std::forward<Call>(call));
  }

  // Rank 0 writes the trained model in a format PyTorch reads, with what produced it.
  void save_artifact(const TrainResult& result) const {
    if (m_config.artifact_dir.empty() || m_comm.rank() != 0) {
      return;
    }
    nlohmann::json metadata = {{"run_id", m_config.run_id}, {"step", m_position.step}};
    if (result.final_eval) {
      metadata["eval_loss"] = result.final_eval->loss;
      if (result.final_eval->accuracy) {
        metadata["eval_accuracy"] = *result.final_eval->accuracy;
      }
    }
    m_model->save_artifact(m_config.artifact_dir / "model.pt", metadata.dump());
  }

  // Files passed over by data.on_bad_image skip, both splits: the run folder lists them.
  void report_skipped() {
    auto files = m_train->skipped();
    const auto eval_files = m_test->skipped();
    files.insert(files.end(), eval_files.begin(), eval_files.end());
    if (!files.empty()) {
      m_sink.on_skipped_images(files);
    }
  }

  GradScalerOptions scaler_options() const {
    // bfloat16 has float32's range: loss scaling is only needed for float16.
    GradScalerOptions options;
    options.enabled = m_config.amp && m_config.amp_dtype == AmpDtype::fp16;
    return options;
  }

  at::Tensor micro_loss(std::int64_t micro, Stopwatch& watch, StepMetrics& phases) {
    const auto begin = static_cast<std::size_t>(micro * m_config.batch_size);
    const auto count = std::min<std::size_t>(static_cast<std::size_t>(m_config.batch_size), m_indices.size() - begin);
    const auto [images, labels] = gather_batch(*m_train, m_indices, begin, count);
    phases.data_wait_s += watch.lap();
    enter(Phase::forward);
    std::optional<AutocastGuard> autocast;
    if (m_config.amp) {
      autocast.emplace(m_comm.device().type(), amp_scalar_type());
    }
    return model_call("the training step", m_position.step + 1, [&] { return m_task.loss(*m_model, images, labels); });
  }

  StepMetrics train_step(const std::atomic<bool>* stop) {
    const auto start = Clock::now();
    const double wait_before = m_comm.wait_seconds();
    const double lr = learning_rate_at(m_schedule, m_config.optim.lr, m_position.step);
    set_learning_rate(*m_optimizer, lr);
    m_ddp.zero_grad();
    m_ddp.vote_stop(stop != nullptr && stop->load());
    const auto first_micro = (m_position.step % m_steps_per_epoch) * m_config.grad_accum_steps;
    const auto bytes_before = m_ddp.bytes_allreduced();
    StepMetrics metrics;
    Stopwatch watch;
    if (m_config.beacon != nullptr) {
      m_config.beacon->step.store(m_position.step + 1, std::memory_order_relaxed);
    }
    double loss_sum = 0.0;
    std::int64_t samples = 0;
    bool nonfinite = false;
    // Python DDP's broadcast_buffers: rank 0's buffers before the step's first forward.
    m_ddp.broadcast_buffers();
    for (std::int64_t k = 0; k < m_config.grad_accum_steps; ++k) {
      enter(Phase::data);
      const auto loss = micro_loss(first_micro + k, watch, metrics);
      const double loss_value = loss.item<double>();
      metrics.forward_s += watch.lap();
      nonfinite = nonfinite || !std::isfinite(loss_value);
      m_ddp.vote_nonfinite(nonfinite);  // read when the boundary backward launches the last bucket
      // (loss / 1 would only add a node to the graph: the same bits, one more backward op.)
      const auto scaled =
          m_scaler.scale(m_config.grad_accum_steps == 1 ? loss : loss / static_cast<double>(m_config.grad_accum_steps));
      enter(Phase::backward);
      // The end of a synchronised backward waits for the buckets' all-reduces (inside backward,
      // in the autograd callback): that wait is comm_wait_s, so it is taken out of backward_s.
      const double wait_before_backward = m_comm.wait_seconds();
      if (k + 1 < m_config.grad_accum_steps) {
        auto no_sync = m_ddp.no_sync();
        model_call("the training step's backward", m_position.step + 1, [&] { scaled.backward(); });
      } else {
        model_call("the training step's backward", m_position.step + 1, [&] { scaled.backward(); });
        m_ddp.finish();
      }
      metrics.backward_s += watch.lap() - (m_comm.wait_seconds() - wait_before_backward);
      loss_sum += loss_value;
      samples += std::min<std::int64_t>(m_config.batch_size,
                                        static_cast<std::int64_t>(m_indices.size()) - (first_micro + k) * m_config.batch_size);
    }
    const double wait_before_optimizer = m_comm.wait_seconds();
    enter(Phase::optimizer);
    metrics.grad_scale = m_scaler.get_scale();
    if (m_config.grad_clip_norm > 0.0) {
      m_scaler.unscale(*m_optimizer);  // clip the true gradients, not the scaled ones
      clip_grad_norm(m_ddp.parameters(), m_config.grad_clip_norm);
    }
    // Every rank learnt from the votes whether any rank's loss was not finite in this step.
    m_nonfinite_now = m_comm.world_size() > 1 ? m_ddp.nonfinite_voted() : nonfinite;
    if (m_nonfinite_now && !m_scaler.enabled()) {
      metrics.skipped = true;  // GradScaler's semantics without a scaler: no update at all
    } else {
      metrics.skipped = !m_scaler.step(*m_optimizer, &m_comm);
      m_scaler.update();
    }
    metrics.optimizer_s = watch.lap() - (m_comm.wait_seconds() - wait_before_optimizer);
    metrics.allreduce_bytes = static_cast<double>(m_ddp.bytes_allreduced() - bytes_before);
    m_position.step += 1;
    metrics.step = m_position.step;
    metrics.epoch = m_position.epoch;
    metrics.loss = loss_sum / static_cast<double>(m_config.grad_accum_steps);
    metrics.lr = lr;
    metrics.step_time_s = seconds_since(start);
    metrics.comm_wait_s = m_comm.wait_seconds() - wait_before;
    metrics.samples_per_sec = metrics.step_time_s > 0.0 ? static_cast<double>(samples) / metrics.step_time_s : 0.0;
    return metrics;
  }

  void after_step(TrainResult& result) {
    if (m_config.eval_every > 0 && m_position.step % m_config.eval_every == 0) {
      enter(Phase::eval);
      result.final_eval = evaluate();
    }
    if ((m_config.checkpoint_every > 0 && m_position.step % m_config.checkpoint_every == 0 &&
         m_position.step < m_total_steps) ||
        checkpoint_due_by_time()) {
      enter(Phase::checkpoint);
      checkpoint();
    }
    if (m_config.monitored_barrier_every > 0 && m_position.step % m_config.monitored_barrier_every == 0 &&
        m_comm.world_size() > 1) {
      enter_collective();
      m_comm.monitored_barrier(fmt::format("the monitored barrier after step {}", m_position.step));
    }
  }

  void enter(Phase phase) const {
    if (m_config.beacon != nullptr) {
      m_config.beacon->enter(phase);
    }
  }

  /// Waiting in a collective that is not a gradient bucket's all-reduce: comm_wait on no bucket
  /// (the DDP reducer's last bucket index would name the wrong wait).
  void enter_collective() const {
    if (m_config.beacon != nullptr) {
      m_config.beacon->bucket.store(-1, std::memory_order_relaxed);
      m_config.beacon->enter(Phase::comm_wait);
    }
  }

  // Every rank evaluates a strided shard without padding; sums are all-reduced so the result is
  // exactly the whole test split's loss and accuracy (over every target: a sequence's tokens each
  // count). A model that fails in evaluation fails the run only after every rank wrote a
  // checkpoint of the training so far (and rank 0 the trained model): the ranks agree on it with
  // the totals' all-reduce, so a rank whose shard fails does not leave the others waiting.
  EvalMetrics evaluate() {
    m_ddp.broadcast_buffers();
    m_model->train(false);
    EvalSums sums;
    std::optional<std::string> failure;
    try {
      sums = eval_sums();
    } catch (const ModelError& error) {
      failure = error.what();
    }
    m_model->train(true);
    auto totals =
        at::tensor({sums.loss, sums.correct.value_or(0.0), static_cast<double>(sums.count), failure ? 1.0 : 0.0},
                   at::kDouble)
            .to(m_comm.device());
    m_comm.allreduce(totals, "allreduce of evaluation totals");
    totals = totals.cpu();
    if (totals[3].item<double>() > 0.0) {
      keep_training_of_failed_evaluation(failure.value_or(""));
      // What was kept, on the first line (the traceback's frames follow it).
      std::string text = failure.value_or(
          fmt::format("{} failed in evaluation at step {} on another rank", model_name(), m_position.step));
      text.insert(std::min(text.find('\n'), text.size()),
                  fmt::format("; the training up to step {} is kept in {}", m_position.step, kept_where()));
      throw ModelError(text);
    }
    const auto n = std::max(1.0, totals[2].item<double>());
    EvalMetrics metrics{m_position.step, totals[0].item<double>() / n, std::nullopt};
    if (sums.correct) {
      metrics.accuracy = totals[1].item<double>() / n;
    }
    if (m_config.amp) {
      metrics.precision = eval_mode_name(m_eval_mode);
      metrics.fallback = m_eval_fallback;
    }
    m_sink.on_eval(metrics);
    return metrics;
  }

  // This rank's sums in the first way of evaluating that works for the model, from the way the
  // last evaluation took: under the training's autocast with gradients off (as PyTorch's own
  // evaluation under torch.autocast); else under that autocast with gradients on, where PyTorch's
  // inference fast paths, which do not all support CPU autocast (nn.TransformerEncoderLayer's in
  // 1.13), stand aside by their own rule; else in fp32 without autocast. Without AMP there is one
  // way. A failure of the last way is the model's.
  EvalSums eval_sums() {
    while (true) {
      try {
        return eval_pass(m_eval_mode);
      } catch (const util::Failure&) {
        throw;
      } catch (const std::exception& error) {
        const auto parsed = parse_model_error(torch_error_text(error));
        if (m_eval_mode == EvalMode::plain || m_eval_mode == EvalMode::fp32) {
          throw ModelError(model_failure_text(model_name(), "evaluation", m_position.step, parsed));
        }
        const auto from = m_eval_mode;
        m_eval_mode = m_eval_mode == EvalMode::autocast ? EvalMode::autocast_with_grad : EvalMode::fp32;
        m_eval_fallback = fmt::format("under {} the model failed: {}", eval_mode_name(from), parsed.message);
        if (m_comm.rank() == 0) {
          util::log::warn(fmt::format("evaluation at step {}: {}; evaluating {} from now on", m_position.step,
                                      m_eval_fallback, eval_mode_name(m_eval_mode)));
        }
      }
    }
  }

  EvalSums eval_pass(EvalMode mode) {
    const at::AutoGradMode gradients(mode == EvalMode::autocast_with_grad);
    const auto size = m_test->size();
    const auto rows = at::arange(m_comm.rank(), size, m_comm.world_size(),
                                 at::TensorOptions().dtype(at::kLong).device(m_comm.device()));
    EvalSums sums;
    for (std::int64_t begin = 0; begin < rows.size(0); begin += m_config.eval_batch_size) {
      const auto chunk = rows.narrow(0, begin, std::min(m_config.eval_batch_size, rows.size(0) - begin));
      const auto labels = m_test->targets(chunk);
      std::optional<AutocastGuard> autocast;
      if (mode == EvalMode::autocast || mode == EvalMode::autocast_with_grad) {
        autocast.emplace(m_comm.device().type(), amp_scalar_type());
      }
      m_task.add_eval(*m_model, m_test->inputs(chunk), labels, sums);
    }
    return sums;
  }

  std::string eval_mode_name(EvalMode mode) const {
    const char* dtype = m_config.amp_dtype == AmpDtype::fp16 ? "fp16" : "bf16";
    switch (mode) {
      case EvalMode::autocast:
        return fmt::format("{} autocast", dtype);
      case EvalMode::autocast_with_grad:
        return fmt::format("{} autocast with gradients on", dtype);
      case EvalMode::fp32:
        return "fp32 without autocast";
      case EvalMode::plain:
        break;
    }
    return "fp32";
  }

  // The model as the user knows it: its file, or the built-in architecture.
  std::string model_name() const {
    return m_config.model.kind == ModelKind::torchscript ? m_config.model.file.string() : m_model->describe();
  }

  // Before a failed evaluation fails the run: every rank's checkpoint of this step, and rank 0's
  // trained model (run folder's model.pt, its metadata saying why it has no evaluation).
  void keep_training_of_failed_evaluation(const std::string& failure) {
    enter(Phase::checkpoint);
    if (m_checkpointed_step != m_position.step) {
      checkpoint();
    }
    if (!m_config.artifact_dir.empty() && m_comm.rank() == 0) {
      nlohmann::json metadata = {{"run_id", m_config.run_id},
                                 {"step", m_position.step},
                                 {"eval_failed", failure.substr(0, failure.find('\n'))}};
      m_model->save_artifact(m_config.artifact_dir / "model.pt", metadata.dump());
    }
  }

  std::string kept_where() const {
    std::string where =
        m_config.checkpoint_dir.empty()
            ? std::string("no checkpoint (the run has no checkpoint folder)")
            : fmt::format("{} (every rank's step-{} checkpoint)", m_config.checkpoint_dir.string(), m_position.step);
    if (!m_config.artifact_dir.empty() && m_config.model.kind == ModelKind::torchscript) {
      where += fmt::format(" and {}", (m_config.artifact_dir / "model.pt").string());
    }
    return where;
  }

  // train.checkpoint_every_s: every rank must write at the same step, so the seconds become a step
  // interval once, k_checkpoint_pace_steps steps into each invocation, from the slowest rank's pace
  // so far (one scalar all-gather per invocation); a clock compared every few steps would cost a
  // collective each time and block a rank whose peer died in it instead of in the all-reduce.
  // Whether to gather is decided from what every rank holds alike (the spec), never from this
  // rank's own checkpoint folder: under an external launcher only rank 0 has one, and a gather
  // that only rank 0 joined hung both ranks at step 21 until the collective timeout.
  bool checkpoint_due_by_time() {
    if (m_config.checkpoint_every_s <= 0 || m_position.step >= m_total_steps) {
      return false;
    }
    if (m_pace_from_step < 0) {
      m_pace_from_step = m_position.step;
      m_pace_from = Clock::now();
    } else if (m_position.step == m_pace_from_step + k_checkpoint_pace_steps) {
      double per_step = seconds_since(m_pace_from) / static_cast<double>(k_checkpoint_pace_steps);
      if (m_comm.world_size() > 1) {
        auto tensor = at::full({1}, per_step, at::kDouble).to(m_comm.device());
        enter_collective();  // a peer that stops here leaves this rank waiting, not in optimizer
        for (const auto& theirs : m_comm.allgather(tensor, "allgather of the ranks' step pace")) {
          per_step = std::max(per_step, theirs.cpu().item<double>());
        }
      }
      m_time_checkpoint_every =
          std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(m_config.checkpoint_every_s / per_step)));
    }
    return m_time_checkpoint_every > 0 && m_position.step % m_time_checkpoint_every == 0;
  }

  void checkpoint() {
    if (m_config.checkpoint_dir.empty()) {
      return;
    }
    CheckpointFile file;
    file.rank = m_comm.rank();
    file.step = m_position.step;
    file.path = checkpoint_path(m_config.checkpoint_dir, file.rank, file.step);
    file.run_id = m_config.run_id;
    file.sha256 = model_call("writing a checkpoint", m_position.step,
                             [&] { return save_checkpoint(file.path, *m_model, *m_optimizer, m_scaler, m_position); });
    m_checkpointed_step = m_position.step;
    std::error_code error;
    file.size_bytes = static_cast<std::int64_t>(std::filesystem::file_size(file.path, error));
    write_checkpoint_index(file);
    prune_checkpoints(m_config.checkpoint_dir, file.rank);
    m_sink.on_checkpoint(file);
  }

  // Where the ranks continue, agreed on their all-gathered newest steps (a rank killed between
  // the ranks' writes leaves them one step apart), by the rule train::common_step states.
  TrainingPosition resume_position() {
    const int rank = m_comm.rank();
    const auto& dir = m_config.checkpoint_dir;
    std::vector<std::string> problems;
    const auto mine = static_cast<double>(newest_resumable(dir, rank, &problems, m_config.run_id));
    auto tensor = at::full({1}, mine, at::kDouble).to(m_comm.device());
    std::vector<std::int64_t> steps;
    for (const auto& theirs : m_comm.allgather(tensor, "allgather of the ranks' checkpoint steps")) {
      steps.push_back(static_cast<std::int64_t>(theirs.cpu().item<double>()));
    }
    const auto common = common_step(steps);
    if (common == k_none_intact) {
      const auto broken = std::find(steps.begin(), steps.end(), common) - steps.begin();
      throw TrainError(fmt::format("no checkpoint step is intact on every rank: {}",
                                   !problems.empty() ? problems.front() : fmt::format("rank {} has none intact", broken)));
    }
    if (common == k_no_checkpoint) {
      return {};  // step 0
    }
    std::string problem;
    const auto file = intact_at(dir, rank, common, &problem, m_config.run_id);
    EXPCTL_CHECK(file.has_value(), TrainError, "cannot resume from step {}: {}", common, problem);
    const auto position = load_checkpoint(file->path, *m_model, *m_optimizer, m_scaler);
    EXPCTL_CHECK(position.step == file->step, TrainError, "{}: holds step {}, its index says {}",
                 file->path.string(), position.step, file->step);
    check_replicas_agree(common);
    return position;
  }

  // DDP replicas are identical after every step, so the parameters every rank restored must be
  // too: a checkpoint of another run (or rank) that got past its index disagrees here.
  void check_replicas_agree(std::int64_t step) {
    if (m_comm.world_size() == 1) {
      return;
    }
    at::NoGradGuard no_grad;
    // A 48-bit fingerprint of the bytes, exact in a double (what the all-gather carries).
    double fingerprint = 0.0;
    {
      std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a over every parameter's bytes
      for (const auto& parameter : m_model->parameters()) {
        const auto bytes = parameter.detach().cpu().contiguous();
        const auto* data = static_cast<const std::uint8_t*>(bytes.data_ptr());
        for (std::int64_t i = 0; i < static_cast<std::int64_t>(bytes.nbytes()); ++i) {
          hash = (hash ^ data[i]) * 1099511628211ULL;
        }
      }
      fingerprint = static_cast<double>(hash >> 16);
    }
    auto mine = at::full({1}, fingerprint, at::kDouble).to(m_comm.device());
    const auto all = m_comm.allgather(mine, "allgather of the restored parameters' fingerprints");
    for (std::size_t rank = 0; rank < all.size(); ++rank) {
      const double theirs = all[rank].cpu().item<double>();
      EXPCTL_CHECK(theirs == fingerprint, TrainError,
                   "the ranks restored different parameters at step {} (rank {} and rank {} disagree): a checkpoint "
                   "of another run was mixed into {}; remove the step-{} checkpoints of every rank to resume from "
                   "the one before",
                   step, rank, m_comm.rank(), m_config.checkpoint_dir.string(), step);
    }
  }

  // A step whose loss was not finite on some rank (every rank saw the same vote).
  void on_nonfinite(const StepMetrics& metrics) {
    m_consecutive_skips += 1;
    if (m_config.nonfinite == NonFinitePolicy::skip && m_consecutive_skips < k_max_consecutive_skips) {
      return;
    }
    m_sink.on_step(metrics);  // the diverged step is recorded like every other
    const std::string loss = std::isfinite(metrics.loss) ? "finite here" : fmt::format("{}", metrics.loss);
    throw DivergedError(
        metrics.step,
        m_config.nonfinite == NonFinitePolicy::skip
            ? fmt::format("the loss was not finite in {} steps in a row up to step {} (this rank's loss {})",
                          m_consecutive_skips, metrics.step, loss)
            : fmt::format("the loss is not finite at step {} (this rank's loss {}): lower optim.lr, set "
                          "train.grad_clip_norm, or set train.nonfinite=skip to skip such steps",
                          metrics.step, loss));
  }

  at::ScalarType amp_scalar_type() const { return m_config.amp_dtype == AmpDtype::fp16 ? at::kHalf : at::kBFloat16; }

  // Every rank ran the same steps (they agree on stopping), so the tables have one shape.
  void report_remote_steps() {
    const int from = m_config.report_steps_from_rank;
    if (from <= 0 || from >= m_comm.world_size()) {
      return;
    }
    const auto k_columns = static_cast<std::int64_t>(step_fields().size());
    auto table = at::empty({static_cast<std::int64_t>(m_history.size()), k_columns}, at::kDouble);
    double* out = table.data_ptr<double>();
    for (const auto& m : m_history) {
      for (const double value : step_row(m)) {
        *out++ = value;
      }
    }
    const auto tables = m_comm.allgather(table, "allgather of every rank's steps");
    if (m_comm.rank() != 0) {
      return;
    }
    for (int rank = from; rank < m_comm.world_size(); ++rank) {
      const auto gathered = tables[static_cast<std::size_t>(rank)].cpu().contiguous();
      const double* v = gathered.data_ptr<double>();
      std::vector<StepMetrics> steps;
      for (std::int64_t i = 0; i < gathered.size(0); ++i, v += k_columns) {
        steps.push_back(step_from_row({v, static_cast<std::size_t>(k_columns)}));
      }
      m_sink.on_remote_steps(rank, steps);
    }
  }

  // Ranks must stop after the same step, or the ones going on would wait for the others'
  // collectives until the timeout: any rank's request stops everyone. The votes travelled with
  // this step's last gradient bucket (DistributedDataParallel::vote_stop): no extra collective.
  bool stop_agreed(const std::atomic<bool>* stop) {
    if (m_comm.world_size() == 1) {
      return stop != nullptr && stop->load();
    }
    return m_ddp.stop_voted();
  }

  const TrainerConfig& m_config;
  MetricSink& m_sink;
  Communicator m_comm;
  std::unique_ptr<Dataset> m_train;
  std::unique_ptr<Dataset> m_test;
  std::unique_ptr<Model> m_model;
  Task m_task;
  DistributedDataParallel m_ddp;
  std::unique_ptr<torch::optim::Optimizer> m_optimizer;
  GradScaler m_scaler;
  DistributedSampler m_sampler;
  std::int64_t m_steps_per_epoch;
  std::int64_t m_total_steps;
  ScheduleOptions m_schedule;
  TrainingPosition m_position;
  std::vector<std::int64_t> m_indices;
  std::vector<StepMetrics> m_history;  // this invocation's steps, for report_remote_steps
  // train.checkpoint_every_s as a step interval (0 until measured), and where its pace was measured from.
  std::int64_t m_time_checkpoint_every = 0;
  std::int64_t m_pace_from_step = -1;
  Clock::time_point m_pace_from;
  bool m_nonfinite_now = false;           // the last step's loss was not finite on some rank
  EvalMode m_eval_mode = EvalMode::plain;  // how evaluation runs (eval_sums): set from train.amp
  std::string m_eval_fallback;             // why it does not run under the training's autocast
  std::int64_t m_checkpointed_step = -1;   // the step of this rank's newest checkpoint
  std::int64_t m_consecutive_skips = 0;
};

}  // namespace

std::int64_t steps_per_epoch(const TrainerConfig& config, std::int64_t dataset_size, int world_size) {
  EXPCTL_CHECK(config.batch_size > 0 && config.grad_accum_steps > 0, TrainError,
               "batch_size and grad_accum_steps must be positive");
  DistributedSampler sampler(sampler_options(config, dataset_size, world_size, 0));
  const auto steps = micro_batches(sampler.num_samples(), config.batch_size, config.drop_last) /
                     config.grad_accum_steps;
  EXPCTL_CHECK(steps > 0, TrainError,
               "an epoch has no complete optimizer step: {} samples per rank, batch_size {} x grad_accum_steps {}",
               sampler.num_samples(), config.batch_size, config.grad_accum_steps);
  return steps;
}

void check_training(const TrainerConfig& config) {
  const at::Device cpu(at::kCPU);
  const auto train = load_split(config, true, cpu);
  const auto test = load_split(config, false, cpu);
  auto model = build_model(config, *train, *test, cpu);
  probe(*model, *train, *test, config.loss);
  // One backward on a tiny batch: a module whose graph cannot be differentiated fails here.
  const auto count = std::min<std::int64_t>(2, train->size());
  const auto rows = at::arange(count, at::TensorOptions().dtype(at::kLong));
  try {
    const auto loss = Task(config.loss).loss(*model, train->inputs(rows), train->targets(rows));
    loss.backward();
  } catch (const util::Failure&) {
    throw;
  } catch (const std::exception& error) {
    throw TrainError(fmt::format("{}: one training step fails: {}", model->describe(),
                                 model_error_line(torch_error_text(error))));
  }
}

TrainResult run_training(const TrainerConfig& config, MetricSink& sink, const std::atomic<bool>* stop) {
  Trainer trainer(config, sink);
  return trainer.run(stop);
}

}  // namespace expctl::train
