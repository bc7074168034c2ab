// `expctl worker --run-dir DIR [--resume]`: one rank of a run (hidden). The supervisor of
// `expctl run` starts one per local rank with torchrun's environment contract; the rank reads
// the resolved spec from the run folder, trains, and reports through its control channel.
// Ranks never open the database: the supervisor is its only writer.

#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_run.hpp"
#include "expctl/launch/rank_channel.hpp"
#include "expctl/train/worker.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"

namespace expctl::cli {
namespace {

struct WorkerOptions {
  std::string run_dir;
  bool resume = false;
};

/// Beats once a second until destroyed, so a frozen rank (not a slow step) is what the
/// supervisor's heartbeat timeout catches.
class HeartbeatThread {
 public:
  explicit HeartbeatThread(launch::RankChannel& channel)
      : m_thread([this, &channel] {
          std::unique_lock lock(m_mutex);
          while (!m_done) {
            channel.heartbeat();
            m_wake.wait_for(lock, std::chrono::seconds(1));
          }
        }) {}
  ~HeartbeatThread() {
    {
      std::lock_guard lock(m_mutex);
      m_done = true;
    }
    m_wake.notify_all();
    m_thread.join();
  }
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

 private:
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_done = false;
  std::thread m_thread;
};

void run_worker_command(const WorkerOptions& options, GlobalOptions& globals) {
  install_stop_handlers();
  util::log::debug(util::tune_malloc_for_training());
  auto channel = launch::RankChannel::from_environment(launch::current_environment());
  HeartbeatThread heartbeat(channel);
  const auto& identity = channel.identity();
  const std::filesystem::path run_dir = options.run_dir;
  // The pid file lets tools (and tests) find a rank without guessing by name.
  (void)util::write_file_atomic(run_dir / "logs" / fmt::format("rank-{}.pid", identity.rank),
                                std::to_string(::getpid()) + "\n");
  train::WorkerRequest request;
  request.spec = read_resolved_run(run_dir).spec;
  request.placement = placement_of(identity);
  // Other nodes' ranks are recorded by their own expctl run; node 0's gets their steps too.
  request.report_steps_from_rank = identity.world_size > identity.local_world_size ? identity.local_world_size : 0;
  request.checkpoint_dir = run_dir / "checkpoints";
  request.resume = options.resume;
  const auto result = train::run_worker(
      request,
      [&channel](const nlohmann::json& record) {
        mark_training_started(record);
        channel.record(record.dump());
      },
      [](const std::string& line) { std::cout << line << std::endl; }, &stop_requested());
  if (result.interrupted) {
    std::cout << fmt::format("interrupted after step {}: checkpoint written", result.steps) << std::endl;
    globals.result = util::ExitCode::interrupted;
  }
}

void setup_worker(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<WorkerOptions>();
  CLI::App* command = app.add_subcommand(
      "worker", "One rank of a run (started by `expctl run`; reads RANK, WORLD_SIZE, MASTER_ADDR, ...).");
  command->group("");  // hidden: people start runs with `expctl run`
  command->add_option("--run-dir", options->run_dir, "Run folder holding resolved.json")->required();
  command->add_flag("--resume", options->resume, "Continue from this rank's checkpoint");
  command->callback([options, globals] { run_worker_command(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(worker, 90, setup_worker);

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
