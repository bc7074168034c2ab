#pragma once
/// The rank's side of the control channel (see control_channel.hpp): heartbeats and records to
/// the supervisor, and the rank's identity from its launcher's environment.

#include <mutex>
#include <string_view>

#include "expctl/launch/environment.hpp"
#include "expctl/launch/rank_identity.hpp"

namespace expctl::launch {

/// Sends heartbeats and records to the supervisor. Thread-safe. Without a supervisor
/// (EXPCTL_CONTROL_FD unset, e.g. under torchrun or srun) every call is a no-op, and once the
/// supervisor has gone (EPIPE) the channel quietly disconnects instead of raising SIGPIPE.
class RankChannel {
 public:
  /// A disconnected channel (every call is a no-op); the identity of a single-process run.
  RankChannel() = default;
  /// A channel writing to `fd` (not owned), for a rank described by `identity`.
  RankChannel(int fd, RankIdentity identity);
  RankChannel(const RankChannel&) = delete;
  RankChannel& operator=(const RankChannel&) = delete;

  /// Reads EXPCTL_CONTROL_FD and the launcher variables (detect_launcher) from `env`. Without a
  /// launcher the identity is that of a single process (rank 0 of 1, launcher "none").
  /// Marks the descriptor close-on-exec, so the rank's own child processes do not hold it open.
  /// Throws LaunchInputError when EXPCTL_CONTROL_FD is not an open descriptor, or as detect_launcher.
  static RankChannel from_environment(const EnvMap& env);

  /// True while records reach a supervisor.
  bool connected() const;
  const RankIdentity& identity() const { return m_identity; }

  /// Tells the supervisor this rank is alive (call at least once per heartbeat timeout).
  void heartbeat();
  /// The same, saying where the rank is ("step=42 phase=backward"): the supervisor keeps the
  /// last one and names it if the rank stops answering. One line, no newline.
  void heartbeat(std::string_view where);
  /// Sends one record (usually a JSON object). Newlines inside `payload` become spaces, as a
  /// newline ends the record on the wire; JSON stays valid since it only allows them as blanks.
  void record(std::string_view payload);

 private:
  void send_line(std::string line);

  mutable std::mutex m_mutex;
  int m_fd = -1;
  RankIdentity m_identity{.launcher = "none"};
};

}  // namespace expctl::launch
