#include "expctl/launch/rank_channel.hpp"

#include <cerrno>
#include <charconv>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/launch_error.hpp"
#include "expctl/launch/write_all.hpp"

namespace expctl::launch {

namespace {

int parse_control_fd(const std::string& text) {
  int fd = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), fd);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || fd < 0 || ::fcntl(fd, F_GETFD) < 0) {
    throw LaunchInputError(
        fmt::format("{}=\"{}\" is not an open file descriptor: start this rank with expctl, or "
                    "unset {}",
                    k_control_fd_variable, text, k_control_fd_variable));
  }
  return fd;
}

}  // namespace

RankChannel::RankChannel(int fd, RankIdentity identity) : m_fd(fd), m_identity(std::move(identity)) {}

RankChannel RankChannel::from_environment(const EnvMap& env) {
  RankIdentity identity = detect_launcher(env).value_or(RankIdentity{.launcher = "none"});
  const auto fd_text = lookup(env, k_control_fd_variable);
  if (!fd_text) {
    return RankChannel(-1, std::move(identity));
  }
  const int fd = parse_control_fd(*fd_text);
  ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  return RankChannel(fd, std::move(identity));
}

bool RankChannel::connected() const {
  const std::lock_guard lock(m_mutex);
  return m_fd >= 0;
}

void RankChannel::heartbeat(std::string_view where) {
  send_line(where.empty() ? std::string(k_heartbeat_message) : fmt::format("{} {}", k_heartbeat_message, where));
}

void RankChannel::heartbeat() {
  send_line(std::string(k_heartbeat_message));
}

void RankChannel::record(std::string_view payload) {
  std::string line(k_record_prefix);
  line.append(payload);
  for (size_t i = k_record_prefix.size(); i < line.size(); ++i) {
    if (line[i] == '\n' || line[i] == '\r')
      line[i] = ' ';
  }
  send_line(std::move(line));
}

void RankChannel::send_line(std::string line) {
  line += '\n';
  const std::lock_guard lock(m_mutex);
  if (m_fd >= 0 && !write_all_ignoring_sigpipe(m_fd, line)) {
    m_fd = -1;  // the supervisor is gone: later calls are no-ops
  }
}

}  // namespace expctl::launch
