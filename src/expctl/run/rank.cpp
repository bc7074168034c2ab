// One rank started by expctl's supervisor (`expctl worker`): reads the resolved spec from the
// run folder, trains, and reports through its control channel. Ranks never open the database.

#include <condition_variable>
#include <iostream>  // std::cin: the run folder of a held rank
#include <mutex>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/launch/rank_channel.hpp"
#include "expctl/launch/supervisor.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/run/forensics.hpp"
#include "expctl/run/resolved_run.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/train/plugin.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/malloc_tuning.hpp"
#include "expctl/util/sandbox.hpp"

namespace expctl::run {
namespace {

// Four heartbeats a second: each says where the training thread is, and a rank that is stopped
// (SIGSTOP, a debugger) is reported as it was at most this long before.
constexpr auto k_heartbeat_every = std::chrono::milliseconds(250);

/// Beats every k_heartbeat_every until destroyed, so a frozen rank (not a slow step, nor one
/// waiting in a collective) is what the supervisor's heartbeat timeout catches.
class HeartbeatThread {
 public:
  HeartbeatThread(launch::RankChannel& channel, const train::Beacon& beacon)
      : m_thread([this, &channel, &beacon] {
          std::unique_lock lock(m_mutex);
          while (!m_done) {
            channel.heartbeat(beacon.where());
            m_wake.wait_for(lock, k_heartbeat_every);
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

/// A rank's records on its control channel, in the wire format (train::RecordEncoder); its first
/// step ends the time in which a stop signal simply exits.
class ChannelSink final : public train::RecordEncoder {
 public:
  ChannelSink(launch::RankChannel& channel, int rank, RankStop& stop)
      : RecordEncoder(rank, [&channel](const nlohmann::json& record) { channel.record(record.dump()); }),
        m_stop(stop) {}
  void on_step(const train::StepMetrics& metrics) override {
    m_stop.mark_training_started();
    RecordEncoder::on_step(metrics);
  }

 private:
  RankStop& m_stop;
};

train::TrainerConfig rank_config(const std::filesystem::path& run_dir, const launch::RankIdentity& identity,
                                 bool resume) {
  const auto resolved = read_resolved_run(run_dir);
  auto config = train_options(resolved.spec, identity, resolved.inputs);
  // Other nodes' ranks are recorded by their own expctl run; node 0's gets their steps too.
  config.report_steps_from_rank = identity.world_size > identity.local_world_size ? identity.local_world_size : 0;
  config.checkpoint_dir = run_dir / "checkpoints";
  config.run_id = run_dir.filename().string();  // a run's folder is named by its id (store::Store::create_run)
  config.artifact_dir = run_dir;
  config.resume = resume;
  config.sandbox = util::sandbox::mode_from_environment();
  config.sandbox_writable = {.folders = {run_dir}, .files = {}, .described = "the run's folder"};
  return config;
}

/// A folder of the run's own for this rank's temporary files ($TMPDIR, which the sandbox lets it
/// write), removed when the rank ends.
class RankTemporaryFolder {
 public:
  RankTemporaryFolder(const std::filesystem::path& run_dir, int rank)
      : m_path(run_dir / "tmp" / fmt::format("rank-{}", rank)) {
    std::error_code error;
    std::filesystem::create_directories(m_path, error);
    ::setenv("TMPDIR", m_path.c_str(), 1);
  }
  ~RankTemporaryFolder() {
    std::error_code error;
    std::filesystem::remove_all(m_path, error);
    std::filesystem::remove(m_path.parent_path(), error);  // the last rank's removal empties it
  }
  RankTemporaryFolder(const RankTemporaryFolder&) = delete;
  RankTemporaryFolder& operator=(const RankTemporaryFolder&) = delete;

 private:
  std::filesystem::path m_path;
};

}  // namespace

int run_rank(const std::filesystem::path& given_run_dir, bool resume, RunObserver& observer, RankStop& stop) {
  util::log::debug(util::tune_malloc_for_training());  // before anything allocates (docs/run.md)
  train::plugin::preload();  // LibTorch starts up while the rank connects to its supervisor
  std::filesystem::path run_dir = given_run_dir;
  if (run_dir == "-") {
    // Started before its run was recorded: the supervisor sends the folder once it exists. End
    // of input without it means there is no run (refused, or not recordable): nothing to do.
    std::string line;
    if (!std::getline(std::cin, line) || line.empty()) {
      return 0;
    }
    run_dir = line;
  }
  stop.arm();
  allow_parent_to_trace();  // the supervisor saves this rank's stack if it ever stops answering
  auto channel = launch::RankChannel::from_environment(launch::current_environment());
  train::Beacon beacon;
  HeartbeatThread heartbeat(channel, beacon);
  const auto& identity = channel.identity();
  // The pid file lets tools (and tests) find a rank without guessing by name.
  (void)util::write_file_atomic(run_dir / "logs" / fmt::format("rank-{}.pid", identity.rank),
                                std::to_string(::getpid()) + "\n");
  auto config = rank_config(run_dir, identity, resume);
  const RankTemporaryFolder temporary(run_dir, identity.rank);
  config.beacon = &beacon;
  ChannelSink sink(channel, identity.rank, stop);
  try {
    const auto result = train::plugin::run_worker(
        config, sink, [&observer](const std::string& line) { observer.output(line); }, &stop.stop_requested());
    if (result.interrupted) {
      observer.output(fmt::format("interrupted after step {}: checkpoint written", result.steps));
      return launch::k_interrupted_exit_code;
    }
    return 0;
  } catch (const train::DivergedError& error) {
    observer.error(error.what());
    return launch::k_diverged_exit_code;
  }
}

}  // namespace expctl::run
