#include "expctl/launch/rank_process.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/write_all.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/spawn.hpp"

namespace expctl::launch::detail {

namespace {

// Output lines longer than this are split: a rank printing a megabyte without a newline must not
// grow the supervisor without bound. Control lines longer than this are dropped instead, since a
// cut record is worse than a missing one.
constexpr size_t k_max_line_bytes = 1 << 20;
constexpr size_t k_read_chunk_bytes = 1 << 16;
static_assert(k_control_fd == 3, "a rank's descriptors are stdin, stdout, stderr and the control channel");

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

struct PipePair {
  int read = -1;
  int write = -1;
  PipePair() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw util::LaunchError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    }
    read = fds[0];
    write = fds[1];
  }
  ~PipePair() {
    close_fd(read);
    close_fd(write);
  }
  int release_read() { return std::exchange(read, -1); }
};

}  // namespace

RankProcess::RankProcess(RankSpec spec, RankSinks sinks, const std::filesystem::path& log_dir)
    : m_spec(std::move(spec)), m_sinks(sinks) {
  m_exit.rank = m_spec.rank;
  open_log(log_dir);
}

void RankProcess::attach(RankSinks sinks, const std::filesystem::path& log_dir) {
  m_sinks = sinks;
  open_log(log_dir);
}

void RankProcess::release(std::string_view line) {
  if (m_stdin_fd < 0) {
    return;
  }
  // A rank that has died already is reaped and reported like any other.
  (void)write_all_ignoring_sigpipe(m_stdin_fd, std::string(line) + "\n");
  close_fd(m_stdin_fd);
  m_last_alive = Clock::now();  // its silence is counted from now, not from its start
}

void RankProcess::open_log(const std::filesystem::path& log_dir) {
  if (log_dir.empty() || m_log_fd >= 0) {
    return;
  }
  const auto path = log_dir / fmt::format("rank-{}.log", m_spec.rank);
  m_log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (m_log_fd < 0) {
    throw util::LaunchError(fmt::format("cannot create the log file {}: {}", path.string(), std::strerror(errno)));
  }
}

RankProcess::~RankProcess() {
  close_fd(m_stdin_fd);  // a held rank reads end-of-file and leaves; the kill below is sooner
  kill_and_reap();
  close_fd(m_log_fd);
}

namespace {

// `environment` with k_metrics_pipe_variable naming the pipe behind `fd` (replacing one a parent
// rank passed down), for the helpers that check what they write to (docs/program.md).
std::vector<std::string> with_pipe_identity(std::vector<std::string> environment, int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return environment;
  }
  const std::string prefix = std::string(k_metrics_pipe_variable) + "=";
  std::erase_if(environment, [&prefix](const std::string& entry) { return entry.starts_with(prefix); });
  environment.push_back(fmt::format("{}{}:{}", prefix, info.st_dev, info.st_ino));
  return environment;
}

}  // namespace

void RankProcess::spawn(const std::vector<std::string>& environment, bool hold) {
  if (m_spec.argv.empty()) {
    throw util::LaunchError(fmt::format("cannot start rank {}: empty command line", m_spec.rank));
  }
  PipePair out, err, control;
  std::optional<PipePair> input;
  int stdin_fd = -1;
  if (hold) {
    input.emplace();
    stdin_fd = input->read;
  } else {
    stdin_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (stdin_fd < 0) {
      throw util::LaunchError(fmt::format("cannot open /dev/null: {}", std::strerror(errno)));
    }
  }
  std::optional<util::sandbox::Ruleset> sandbox;
  if (m_spec.sandbox) {
    sandbox.emplace(*m_spec.sandbox);
  }
  auto started = util::ChildProcess::spawn({.argv = m_spec.argv,
                                            .environment = with_pipe_identity(environment, control.write),
                                            .fds = {stdin_fd, out.write, err.write, control.write},
                                            .working_directory = m_spec.workdir,
                                            .death_signal = SIGKILL,
                                            .sandbox_ruleset_fd = sandbox ? sandbox->fd() : -1});
  if (input) {
    close_fd(input->read);
    m_stdin_fd = std::exchange(input->write, -1);
  } else {
    ::close(stdin_fd);
  }
  if (!started) {
    const util::SpawnError& error = started.error();
    if (error.call == "exec") {
      throw util::LaunchError(
          fmt::format("cannot start rank {}: \"{}\": {}", m_spec.rank, m_spec.argv[0], std::strerror(error.error)));
    }
    throw util::LaunchError(
        fmt::format("cannot start rank {}: {} failed: {}", m_spec.rank, error.call, std::strerror(error.error)));
  }
  m_process = std::move(*started);
  m_exit.pid = m_process.pid();
  m_running = true;
  m_last_alive = Clock::now();
  close_fd(out.write);
  close_fd(err.write);
  close_fd(control.write);
  m_out.fd = out.release_read();
  m_err.fd = err.release_read();
  m_control.fd = control.release_read();
  for (const int fd : {m_out.fd, m_err.fd, m_control.fd}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
}

RankProcess::Stream& RankProcess::stream(Channel channel) {
  switch (channel) {
    case Channel::out:
      return m_out;
    case Channel::err:
      return m_err;
    case Channel::control:
      break;
  }
  return m_control;
}

void RankProcess::add_poll_fds(std::vector<pollfd>& fds, std::vector<Channel>& channels) const {
  const std::array<std::pair<const Stream*, Channel>, 3> streams = {
      {{&m_out, Channel::out}, {&m_err, Channel::err}, {&m_control, Channel::control}}};
  for (const auto& [s, channel] : streams) {
    if (s->fd >= 0) {
      fds.push_back({s->fd, POLLIN, 0});
      channels.push_back(channel);
    }
  }
}

void RankProcess::on_readable(Channel channel) {
  if (read_some(channel) == ReadResult::end) {
    close_stream(channel);
  }
}

RankProcess::ReadResult RankProcess::read_some(Channel channel) {
  Stream& s = stream(channel);
  std::array<char, k_read_chunk_bytes> buffer{};
  const ssize_t n = ::read(s.fd, buffer.data(), buffer.size());
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    return ReadResult::would_block;
  }
  if (n <= 0) {
    return ReadResult::end;  // end of file, or an error that ends the stream the same way
  }
  s.partial.append(buffer.data(), static_cast<size_t>(n));
  size_t start = 0;
  for (size_t newline = s.partial.find('\n'); newline != std::string::npos; newline = s.partial.find('\n', start)) {
    on_line(channel, std::string_view(s.partial).substr(start, newline - start));
    start = newline + 1;
  }
  s.partial.erase(0, start);
  if (s.partial.size() > k_max_line_bytes) {
    on_line(channel, s.partial);
    s.partial.clear();
  }
  return ReadResult::data;
}

void RankProcess::close_stream(Channel channel) {
  Stream& s = stream(channel);
  if (!s.partial.empty()) {
    on_line(channel, s.partial);  // a last line without its newline still counts
    s.partial.clear();
  }
  close_fd(s.fd);
}

void RankProcess::drain_and_close() {
  for (const Channel channel : {Channel::out, Channel::err, Channel::control}) {
    Stream& s = stream(channel);
    // Would-block after the rank ended: only a grandchild still holds the pipe, and what it
    // writes later is not the rank's.
    while (s.fd >= 0 && read_some(channel) == ReadResult::data) {
    }
    close_stream(channel);
  }
}

void RankProcess::on_line(Channel channel, std::string_view line) {
  if (channel != Channel::control) {
    on_output_line(channel, line);
    return;
  }
  m_last_alive = Clock::now();
  m_spoke = true;
  if (m_spec.protocol == ControlProtocol::lines) {
    if (m_sinks.on_record != nullptr && *m_sinks.on_record) {
      (*m_sinks.on_record)(m_spec.rank, line);  // a program's line, long or not: the caller judges it
    }
    return;
  }
  if (line.size() > k_max_line_bytes) {
    on_output_line(Channel::err, fmt::format("expctl: dropped a control line of {} bytes", line.size()));
    return;
  }
  const ControlMessage message = parse_control_line(line);
  if (message.kind == ControlKind::heartbeat && !message.payload.empty()) {
    m_last_heartbeat.assign(message.payload);
  }
  if (message.kind == ControlKind::record && m_sinks.on_record != nullptr && *m_sinks.on_record) {
    (*m_sinks.on_record)(m_spec.rank, message.payload);
  }
}

void RankProcess::on_output_line(Channel channel, std::string_view line) {
  if (m_log_fd >= 0) {
    std::string text(line);
    text += '\n';
    [[maybe_unused]] const ssize_t ignored = ::write(m_log_fd, text.data(), text.size());
  }
  m_tail.emplace_back(line);
  while (m_tail.size() > m_sinks.tail_lines) {
    m_tail.pop_front();
  }
  if ((channel == Channel::err || m_spec.rank == 0) && m_sinks.console != nullptr && *m_sinks.console) {
    (*m_sinks.console)(fmt::format("[rank {}] {}", m_spec.rank, line));
  }
}

void RankProcess::record_status(int status) {
  m_running = false;
  if (WIFEXITED(status)) {
    m_exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    m_exit.signal = WTERMSIG(status);
  }
  drain_and_close();
}

bool RankProcess::try_reap() {
  if (!m_running) {
    return false;
  }
  const auto status = m_process.try_wait();
  if (!status) {
    return false;
  }
  record_status(*status);
  return true;
}

void RankProcess::signal_group(int signal) {
  if (m_running) {
    m_exit.stopped_by_supervisor = true;
    m_process.signal_group(signal);
  }
}

void RankProcess::kill_and_reap() {
  if (m_exit.pid <= 0) {
    return;
  }
  m_process.kill_group_and_reap();  // also any grandchild left in the group
  if (m_running) {
    m_exit.stopped_by_supervisor = true;
    record_status(m_process.wait());
  }
  for (const Channel channel : {Channel::out, Channel::err, Channel::control}) {
    close_stream(channel);
  }
}

}  // namespace expctl::launch::detail
