#include "expctl/util/process_identity.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <ctime>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace expctl::util {

namespace {

/// Field 22 (start time) counted from field 3 (state), the first field after the last ')'.
constexpr int k_start_field_after_state = 22 - 3;

/// The first line of a file, or "" when it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// The next space-separated field of `text` (advanced past it), or "" at the end.
std::string_view next_field(std::string_view& text) {
  const size_t begin = text.find_first_not_of(' ');
  if (begin == std::string_view::npos) {
    text = {};
    return {};
  }
  const size_t end = std::min(text.find(' ', begin), text.size());
  const std::string_view field = text.substr(begin, end - begin);
  text.remove_prefix(end);
  return field;
}

/// This machine's host name and boot id: the same for every process of one boot, so read once.
const ProcessIdentity& this_machine() {
  static const ProcessIdentity machine{host_name(), 0, first_line("/proc/sys/kernel/random/boot_id"), 0};
  return machine;
}

}  // namespace

const std::string& host_name() {
  static const std::string name = [] {
    char text[HOST_NAME_MAX + 1] = {};
    return ::gethostname(text, sizeof text - 1) == 0 && text[0] != '\0' ? std::string(text) : std::string("localhost");
  }();
  return name;
}

std::optional<double> seconds_since_process_start() {
  const auto stat = read_proc_stat(::getpid());
  timespec now{};
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (!stat || ticks_per_second <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) {
    return std::nullopt;
  }
  const double started = static_cast<double>(stat->start_ticks) / static_cast<double>(ticks_per_second);
  return std::max(0.0, static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9 - started);
}

std::optional<ProcStat> parse_proc_stat(std::string_view line) {
  const size_t paren = line.rfind(')');
  if (paren == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view rest = line.substr(paren + 1);
  const std::string_view state = next_field(rest);
  std::string_view start;
  for (int i = 0; i < k_start_field_after_state; ++i) {
    start = next_field(rest);
  }
  ProcStat stat;
  const auto [end, error] = std::from_chars(start.data(), start.data() + start.size(), stat.start_ticks);
  if (state.size() != 1 || start.empty() || error != std::errc() || end != start.data() + start.size()) {
    return std::nullopt;
  }
  stat.state = state[0];
  return stat;
}

std::optional<ProcStat> read_proc_stat(std::int64_t pid) {
  if (pid <= 0) {
    return std::nullopt;
  }
  return parse_proc_stat(first_line(fmt::format("/proc/{}/stat", pid)));
}

ProcessIdentity ProcessIdentity::current() {
  ProcessIdentity identity = this_machine();
  identity.pid = ::getpid();
  identity.start_ticks = read_proc_stat(identity.pid).value_or(ProcStat{}).start_ticks;
  return identity;
}

Liveness ProcessIdentity::liveness() const {
  const ProcessIdentity& here = this_machine();
  if (host != here.host || here.boot_id.empty()) {
    return Liveness::unknown_elsewhere;
  }
  if (boot_id != here.boot_id) {
    return Liveness::dead;  // this host has rebooted since: every process of that boot is gone
  }
  const auto stat = read_proc_stat(pid);
  const bool gone = !stat || stat->state == 'Z' || stat->state == 'X';
  return gone || stat->start_ticks != start_ticks ? Liveness::dead : Liveness::alive;
}

std::string ProcessIdentity::display() const {
  return fmt::format("{}:{}", host, pid);
}

std::string namespace_inode(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0 ? std::to_string(info.st_ino) : "?";
}

}  // namespace expctl::util
