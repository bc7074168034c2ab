#include "expctl/train/worker.hpp"

#include <chrono>

#include <fmt/format.h>

#include "expctl/train/trainer.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

/// Forwards the trainer's records to the caller's sink as they are, and every log_every steps
/// a progress line (rank 0).
class ProgressLines final : public MetricSink {
 public:
  ProgressLines(MetricSink& sink, const LineSink& on_line, int rank, int world_size, std::int64_t total_steps,
                std::int64_t log_every)
      : m_sink(sink),
        m_on_line(on_line),
        m_rank(rank),
        m_world_size(world_size),
        m_total_steps(total_steps),
        m_log_every(log_every) {}

  void on_step(const StepMetrics& m) override {
    m_sink.on_step(m);
    if (m_rank == 0 && m_on_line && (m.step % m_log_every == 0 || m.step == m_total_steps)) {
      m_on_line(progress_line(m));
    }
  }

  void on_eval(const EvalMetrics& m) override {
    m_sink.on_eval(m);
    if (m_rank == 0 && m_on_line) {
      m_on_line(m.accuracy ? fmt::format("eval step {} loss {:.4f} accuracy {:.4f}", m.step, m.loss, *m.accuracy)
                           : fmt::format("eval step {} loss {:.4f}", m.step, m.loss));
    }
  }

  void on_remote_steps(int rank, const std::vector<StepMetrics>& steps) override {
    m_sink.on_remote_steps(rank, steps);
  }
  void on_collectives(const std::string& allreduce) override { m_sink.on_collectives(allreduce); }
  void on_skipped_images(const std::vector<std::string>& files) override { m_sink.on_skipped_images(files); }
  void on_checkpoint(const CheckpointFile& file) override { m_sink.on_checkpoint(file); }

 private:
  std::string progress_line(const StepMetrics& m) {
    // The mean time a step since the first line, as the terminal's progress line (cli/support_observer.cpp)
    // has it: one slow step does not swing the ETA, and the evals and checkpoints between lines
    // count by their share. (Over the steps since the last line only, the line after an eval said
    // 13 s where 2 s were left.)
    const auto now = std::chrono::steady_clock::now();
    if (!m_first_line) {
      m_first_line = now;
      m_first_step = m.step;
    }
    const double elapsed = std::chrono::duration<double>(now - *m_first_line).count();
    const std::int64_t steps = m.step - m_first_step;
    const double per_step = elapsed > 0.0 && steps > 0 ? elapsed / static_cast<double>(steps) : m.step_time_s;
    const double eta = per_step * static_cast<double>(std::max<std::int64_t>(0, m_total_steps - m.step));
    return fmt::format("step {}/{} epoch {} loss {:.4f} samples/s {:.0f} eta {}", m.step, m_total_steps, m.epoch,
                       m.loss, m.samples_per_sec * m_world_size, eta_text(eta));
  }

  MetricSink& m_sink;
  const LineSink& m_on_line;
  int m_rank;
  int m_world_size;
  std::int64_t m_total_steps;
  std::int64_t m_log_every;
  std::optional<std::chrono::steady_clock::time_point> m_first_line;
  std::int64_t m_first_step = 0;
};

}  // namespace

WorkerResult run_worker(const TrainerConfig& config, MetricSink& sink, const LineSink& on_line,
                        const std::atomic<bool>* stop) {
  const int world = config.group.placement.world_size;
  const std::int64_t per_epoch = steps_per_epoch(config, training_set_size(config.data), world);
  const std::int64_t total = config.max_steps > 0 ? config.max_steps : config.epochs * per_epoch;
  sink.on_start({config.group.placement.rank, world, total, per_epoch, config.resume});
  ProgressLines lines(sink, on_line, config.group.placement.rank, world, total,
                      std::max<std::int64_t>(1, config.log_every));
  const TrainResult result = run_training(config, lines, stop);
  WorkerResult outcome;
  outcome.steps = result.steps;
  outcome.interrupted = result.interrupted;
  outcome.final_train_loss = result.final_train_loss;
  if (result.final_eval) {
    outcome.eval_accuracy = result.final_eval->accuracy;
  }
  sink.on_end({outcome.steps, outcome.interrupted, outcome.final_train_loss});
  return outcome;
}

}  // namespace expctl::train
