#pragma once
/// Internal to the supervisor: one rank's child process, its three pipes (stdout, stderr,
/// control channel), its log file and the tail of its output. No policy lives here.

#include <chrono>
#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <poll.h>
#include <sys/types.h>

#include "expctl/launch/supervisor.hpp"
#include "expctl/util/spawn.hpp"

namespace expctl::launch::detail {

using Clock = std::chrono::steady_clock;

/// What the supervisor hands each rank: where its output goes.
struct RankSinks {
  const ConsoleSink* console = nullptr;
  const RecordSink* on_record = nullptr;
  size_t tail_lines = 50;
};

class RankProcess {
 public:
  enum class Channel { out, err, control };

  /// Opens the log file; the process starts with spawn().
  RankProcess(RankSpec spec, RankSinks sinks, const std::filesystem::path& log_dir);
  /// SIGKILLs the process group and reaps the process if it is still running.
  ~RankProcess();
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  /// Forks and execs the rank with `environment` ("NAME=value"). Throws util::LaunchError when
  /// the program cannot be executed. `hold`: its standard input is a pipe, for release().
  void spawn(const std::vector<std::string>& environment, bool hold = false);
  /// Gives a rank started before its run (see HeldRanks) its sinks and log file.
  void attach(RankSinks sinks, const std::filesystem::path& log_dir);
  /// Writes `line` and a newline to a held rank's standard input and closes it; no-op otherwise.
  void release(std::string_view line);

  int rank() const { return m_spec.rank; }
  pid_t pid() const { return m_exit.pid; }
  bool running() const { return m_running; }
  const RankExit& exit() const { return m_exit; }
  Clock::time_point last_alive() const { return m_last_alive; }
  /// True once the rank has written a line on its control channel.
  bool spoke() const { return m_spoke; }
  std::vector<std::string> last_lines() const { return {m_tail.begin(), m_tail.end()}; }
  /// The payload of its last heartbeat ("step=42 phase=backward"); empty when it sent none.
  const std::string& last_heartbeat() const { return m_last_heartbeat; }

  /// Appends the open pipes to `fds` and the matching channel to `channels`.
  void add_poll_fds(std::vector<pollfd>& fds, std::vector<Channel>& channels) const;
  /// Reads what is available on `channel` (after poll said so).
  void on_readable(Channel channel);
  /// Reaps the process if it has ended (then drains and closes its pipes); true when it just did.
  bool try_reap();
  /// Sends `signal` to the rank's process group (no-op once reaped).
  void signal_group(int signal);
  /// SIGKILL to the whole group (also grandchildren left after the rank ended), blocking reap.
  void kill_and_reap();

 private:
  struct Stream {
    int fd = -1;
    std::string partial;
  };
  enum class ReadResult { data, would_block, end };
  Stream& stream(Channel channel);
  /// One read of up to 64 KiB, split into lines.
  ReadResult read_some(Channel channel);
  void drain_and_close();
  void close_stream(Channel channel);
  void on_line(Channel channel, std::string_view line);
  void on_output_line(Channel channel, std::string_view line);
  void record_status(int status);
  void open_log(const std::filesystem::path& log_dir);

  RankSpec m_spec;
  RankSinks m_sinks;
  util::ChildProcess m_process;
  int m_log_fd = -1;
  int m_stdin_fd = -1;  ///< a held rank's standard input, until release()
  Stream m_out;
  Stream m_err;
  Stream m_control;
  bool m_running = false;
  RankExit m_exit;
  Clock::time_point m_last_alive = Clock::now();
  std::string m_last_heartbeat;
  bool m_spoke = false;
  std::deque<std::string> m_tail;
};

}  // namespace expctl::launch::detail
