// The built-in trainer under an external launcher (torchrun, mpirun, srun, Kubeflow): this process
// is one rank and trains in-process; global rank 0 records the run (its own CPU and memory too),
// the others only train and log.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/launch/process_usage.hpp"
#include "expctl/run/lifecycle.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"
#include "expctl/util/process_identity.hpp"

namespace expctl::run::lifecycle {
namespace {

train::TrainerConfig external_config(const spec::Spec& spec, const launch::RankIdentity& identity) {
  auto config = train_options(spec.values(), identity, spec.input_paths());
  config.report_steps_from_rank = 1;  // only rank 0 records: it reports every other rank's steps
  return config;
}

// A rank other than 0 records nothing (rank 0 reports its steps at the end); its first step ends
// the time in which a stop signal simply exits.
class UnrecordedRank final : public train::MetricSink {
 public:
  explicit UnrecordedRank(RankStop& stop) : m_stop(stop) {}
  void on_step(const train::StepMetrics& /*metrics*/) override { m_stop.mark_training_started(); }
  void on_eval(const train::EvalMetrics& /*metrics*/) override {}
  void on_checkpoint(const train::CheckpointFile& /*file*/) override {}

 private:
  RankStop& m_stop;
};

// Rank 0 trains in the recording process: its records reach the recorder as the typed values they
// are, and after each one a store that can no longer be written ends training.
class RankZeroSink final : public train::MetricSink {
 public:
  RankZeroSink(Recorder& recorder, RankStop& stop) : m_recorder(recorder), m_stop(stop) {}
  void on_start(const train::TrainingStart& start) override {
    m_recorder.on_start(start);
    m_recorder.throw_if_fatal();
  }
  void on_step(const train::StepMetrics& metrics) override {
    m_stop.mark_training_started();
    m_recorder.on_step(0, metrics);
    m_recorder.throw_if_fatal();
  }
  void on_eval(const train::EvalMetrics& metrics) override {
    m_recorder.on_eval(metrics);
    m_recorder.throw_if_fatal();
  }
  void on_checkpoint(const train::CheckpointFile& file) override {
    m_recorder.on_checkpoint(file);
    m_recorder.throw_if_fatal();
  }
  void on_remote_steps(int rank, const std::vector<train::StepMetrics>& steps) override {
    m_recorder.on_remote_steps(rank, steps);
    m_recorder.throw_if_fatal();
  }
  void on_collectives(const std::string& allreduce) override {
    m_recorder.on_collectives(allreduce);
    m_recorder.throw_if_fatal();
  }
  void on_skipped_images(const std::vector<std::string>& files) override {
    m_recorder.on_skipped_images(files);
    m_recorder.throw_if_fatal();
  }
  void on_end(const train::TrainingEnd& /*end*/) override { m_recorder.throw_if_fatal(); }

 private:
  Recorder& m_recorder;
  RankStop& m_stop;
};

// Under an external launcher no supervisor samples the ranks: rank 0, which records the run,
// samples its own process (CPU, memory, and the GPU where it uses one) once a second into the
// series a supervised rank gets (sys_cpu_percent, sys_rss_mb, ...); EXPCTL_SYS_METRICS=0 turns it
// off as there. The other ranks record nothing, these included.
class OwnUsage {
 public:
  explicit OwnUsage(Recorder& recorder) {
    if (Recorder::usage_wanted()) {
      m_thread = std::thread([this, &recorder] { sample(recorder); });
    }
  }
  ~OwnUsage() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }
  OwnUsage(const OwnUsage&) = delete;
  OwnUsage& operator=(const OwnUsage&) = delete;

 private:
  void sample(Recorder& recorder) {
    launch::UsageRate usage;
    launch::GpuUsage gpu_usage;
    std::unique_lock lock(m_mutex);
    do {
      lock.unlock();
      const auto gpu = gpu_usage.read();
      if (const auto sample = usage.read(0, ::getpid(), launch::UsageRate::Clock::now(), gpu ? &*gpu : nullptr)) {
        recorder.on_usage(0, *sample);
      }
      lock.lock();
    } while (!m_wake.wait_for(lock, std::chrono::seconds(1), [this] { return m_stop; }));
  }

  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::thread m_thread;
};

// The trainer's own lines: this process's output (the launcher collects it).
train::LineSink output_to(RunObserver& observer) {
  return [&observer](const std::string& line) { observer.output(line); };
}

RunResult external_other_rank(const train::TrainerConfig& config, RunObserver& observer, RankStop& stop) {
  RunResult result;
  try {
    UnrecordedRank sink(stop);
    const auto trained = train::plugin::run_worker(config, sink, output_to(observer), &stop.stop_requested());
    result.exit_code = trained.interrupted ? util::ExitCode::interrupted : util::ExitCode::ok;
  } catch (const train::DivergedError& error) {
    observer.error(error.what());
    result.exit_code = util::ExitCode::run_failed;
  }
  return result;
}

Verdict train_as_rank_zero(const train::TrainerConfig& config, Recorder& recorder, RunObserver& observer,
                           RankStop& stop) {
  try {
    RankZeroSink sink(recorder, stop);
    const auto trained = train::plugin::run_worker(config, sink, output_to(observer), &stop.stop_requested());
    if (trained.interrupted) {
      return {store::RunStatus::interrupted, util::ExitCode::interrupted, "interrupted by a signal"};
    }
    return {};
  } catch (const train::DivergedError& error) {
    const auto divergence = recorder.divergence();
    return {store::RunStatus::diverged, util::ExitCode::run_failed,
            (divergence ? divergence_text(*divergence) : std::string(error.what())) +
                ": lower optim.lr, set train.grad_clip_norm, or set train.nonfinite=skip to skip such steps"};
  } catch (const util::Failure& error) {
    return {store::RunStatus::failed, util::ExitCode::run_failed, fmt::format("rank 0: {}", error.what())};
  }
}

}  // namespace

// Under an external launcher: the one rank this process is (launch::identity_plan), and the node's
// part as the run records it, taken from that plan.
void plan_external(Invocation& invocation, const launch::RankIdentity& identity) {
  invocation.plan = launch::identity_plan(identity);
  invocation.external = true;
  auto& node = invocation.resolved.node;
  node.nnodes = invocation.plan.nnodes;
  node.node_rank = invocation.plan.node_rank;
  node.nproc_per_node = invocation.plan.nproc_per_node;
  node.master_addr = invocation.plan.master_addr;
  node.master_port = invocation.plan.master_port;
}

RunResult run_as_external_rank(SteadyClock::time_point started, const RunRequest& request, const spec::Spec& spec,
                               const StackCheck& stack, const launch::RankIdentity& identity) {
  util::log::debug(util::tune_malloc_for_training());  // before anything allocates (docs/run.md)
  train::plugin::preload();  // this process trains: LibTorch starts up while the run is recorded
  RunObserver& observer = observer_or_silent(request.observer);
  RankStop& stop = stop_or_none(request.stop);
  stop.arm();
  auto config = external_config(spec, identity);
  if (identity.rank != 0) {
    return external_other_rank(config, observer, stop);  // only global rank 0 records; the others train and log
  }
  store::Store store = request.open_store();
  Invocation invocation;
  invocation.started = started;
  invocation.resolved.spec = resolved_values(spec, request.tensorboard);
  invocation.resolved.inputs = spec.input_paths();
  invocation.resolved.spec_file = std::filesystem::absolute(spec.file()).string();
  plan_external(invocation, identity);
  invocation.drift = stack.drifted();
  invocation.observer = &observer;
  auto tags = request.tags;
  tags.push_back(launcher_tag(identity.launcher));
  invocation.run = record_new_run(store, spec, &stack, tags, invocation.resolved);
  store.add_rank(invocation.run.id, store::RankRecord{.rank = 0, .host = util::host_name(), .pid = ::getpid()});
  config.checkpoint_dir = invocation.run.run_dir / "checkpoints";
  config.run_id = invocation.run.id;  // each checkpoint's index names its run, as a supervised rank's does
  Verdict verdict;
  RunFacts facts;
  {
    Recorder recorder(store, invocation.run.id, invocation.run.run_dir, observer, invocation.started);
    export_tensorboard(recorder, store, invocation, invocation.plan.world_size);
    {
      const OwnUsage own_usage(recorder);
      verdict = train_as_rank_zero(config, recorder, observer, stop);
    }
    observer.finish();
    recorder.drain();
    facts = recorder.facts();
  }
  store.update_rank(invocation.run.id, 0, verdict.status, util::to_int(verdict.exit_code), std::nullopt);
  return conclude(store, invocation, verdict, facts);
}

}  // namespace expctl::run::lifecycle

namespace expctl::run {

namespace {
constexpr std::string_view k_launcher_prefix = "launcher:";
}  // namespace

std::string launcher_tag(const std::string& launcher) {
  return std::string(k_launcher_prefix) + launcher;
}

std::optional<std::string> external_launcher(const store::RunRecord& run) {
  for (const std::string& tag : run.tags) {
    if (tag.starts_with(k_launcher_prefix)) {
      return tag.substr(k_launcher_prefix.size());
    }
  }
  return std::nullopt;
}

}  // namespace expctl::run
