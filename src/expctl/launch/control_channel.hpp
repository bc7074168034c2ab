#pragma once
/// The control channel between a rank and its supervisor: a pipe whose write end the rank finds
/// at the file descriptor named by EXPCTL_CONTROL_FD. Text, one message per line:
///
///   heartbeat [<where>]  "I am alive", optionally with where the rank is (free text, e.g.
///                        "step=42 phase=comm_wait bucket=0"), kept as the rank's last heartbeat
///   record <payload>     a metric or event record (usually one JSON object), handed verbatim to
///                        the supervisor's record callback; also counts as a heartbeat
///
/// Any other line is ignored (and still counts as a sign of life), so newer ranks can add
/// message kinds without breaking an older supervisor. A line of at most PIPE_BUF (4096) bytes
/// is written atomically. The rank side is `RankChannel`.

#include <string_view>

namespace expctl::launch {

/// Names the file descriptor of the control channel's write end in a rank's environment.
inline constexpr const char* k_control_fd_variable = "EXPCTL_CONTROL_FD";
/// Names the same descriptor for a user's program (docs/program.md): JSON lines of metrics.
inline constexpr const char* k_metrics_fd_variable = "EXPCTL_METRICS_FD";
/// The identity of that descriptor's pipe, "<st_dev>:<st_ino>": a process that finds another
/// file at EXPCTL_METRICS_FD (a child that inherited the variables, not the pipe) writes nothing.
inline constexpr const char* k_metrics_pipe_variable = "EXPCTL_METRICS_PIPE";
/// The descriptor the supervisor places the channel at in every rank.
inline constexpr int k_control_fd = 3;

inline constexpr std::string_view k_heartbeat_message = "heartbeat";
inline constexpr std::string_view k_record_prefix = "record ";

enum class ControlKind { heartbeat, record, unknown };

/// One parsed control line (without its newline); `payload` views into the line.
struct ControlMessage {
  ControlKind kind = ControlKind::unknown;
  std::string_view payload;
};

/// Parses one control line.
constexpr ControlMessage parse_control_line(std::string_view line) {
  if (line == k_heartbeat_message) {
    return {ControlKind::heartbeat, {}};
  }
  if (line.substr(0, k_heartbeat_message.size() + 1) == std::string_view("heartbeat ")) {
    return {ControlKind::heartbeat, line.substr(k_heartbeat_message.size() + 1)};
  }
  if (line.substr(0, k_record_prefix.size()) == k_record_prefix) {
    return {ControlKind::record, line.substr(k_record_prefix.size())};
  }
  return {ControlKind::unknown, line};
}

}  // namespace expctl::launch
