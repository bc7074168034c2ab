#include "expctl/run/journal.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"

namespace expctl::run {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The next space-separated field of `rest` (which then holds what follows the space).
std::string_view take_field(std::string_view& rest) {
  const auto space = rest.find(' ');
  const std::string_view field = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  return field;
}

template <typename Number>
std::optional<Number> number(std::string_view text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() ? std::optional(value) : std::nullopt;
}

std::string marker(char kind, int invocation, double time) {
  return fmt::format("{} {} {:.3f}\n", kind, invocation, time);
}

}  // namespace

std::vector<const JournalHistory::Invocation*> JournalHistory::unfinished() const {
  std::vector<const Invocation*> out;
  for (const auto& invocation : invocations) {
    if (!invocation.ended) {
      out.push_back(&invocation);
    }
  }
  return out;
}

double JournalHistory::unfinished_seconds() const {
  double total = 0.0;
  for (const auto* invocation : unfinished()) {
    total += std::max(0.0, invocation->last_seen - invocation->started);
  }
  return total;
}

JournalHistory read_journal(const std::filesystem::path& run_dir) {
  JournalHistory history;
  std::ifstream in(run_dir / k_journal_file, std::ios::binary);
  std::map<int, std::size_t> index;  // invocation -> its place in history.invocations
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) {
      break;  // no newline: a line cut short when the supervisor was killed
    }
    std::string_view rest = line;
    const std::string_view kind = take_field(rest);
    if (kind == "S" || kind == "E" || kind == "T") {
      const auto invocation = number<int>(take_field(rest));
      const auto time = number<double>(take_field(rest));
      if (!invocation || !time) {
        continue;
      }
      if (kind == "S") {
        index[*invocation] = history.invocations.size();
        history.invocations.push_back(
            {.number = *invocation, .started = *time, .last_seen = *time, .ended = false, .records = {}});
      } else if (const auto found = index.find(*invocation); found != index.end()) {
        auto& earlier = history.invocations[found->second];
        earlier.ended = earlier.ended || kind == "E";
        earlier.last_seen = std::max(earlier.last_seen, *time);
      }
    } else if (kind == "R" && !history.invocations.empty()) {
      const auto time = number<double>(take_field(rest));
      const auto rank = number<int>(take_field(rest));
      if (!time || !rank || *rank < 0) {
        continue;
      }
      auto& current = history.invocations.back();
      current.last_seen = std::max(current.last_seen, *time);
      current.records.emplace_back(*rank, std::string(rest));
    }
  }
  return history;
}

RecordJournal::RecordJournal(std::filesystem::path run_dir, std::function<void(const std::string&)> warn,
                             std::size_t compact_bytes)
    : m_path(std::move(run_dir) / k_journal_file), m_warn(std::move(warn)), m_compact_bytes(compact_bytes) {
  m_history = read_journal(m_path.parent_path());
  for (const auto& invocation : m_history.invocations) {
    m_invocation = std::max(m_invocation, invocation.number + 1);
  }
  m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    m_warn(
        fmt::format("warning: cannot keep the record journal {}: {}; a supervisor killed now loses its last "
                    "unwritten steps",
                    m_path.string(), std::strerror(errno)));
    return;
  }
  m_started = unix_now();
  write_line(marker('S', m_invocation, m_started));
}

RecordJournal::~RecordJournal() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

void RecordJournal::append(int rank, std::string_view record) {
  if (m_fd < 0 || record.find('\n') != std::string_view::npos) {
    return;
  }
  const double now = unix_now();
  std::string line = fmt::format("R {:.3f} {} {}\n", now, rank, record);
  write_line(line);
  m_recent_bytes += line.size();
  m_recent.emplace_back(now, std::move(line));
  while (m_recent.size() > 1 &&
         (m_recent.front().first < now - k_journal_keep_seconds || m_recent_bytes > k_journal_keep_bytes)) {
    m_recent_bytes -= m_recent.front().second.size();
    m_recent.pop_front();
  }
}

void RecordJournal::release_replayed() {
  for (auto& invocation : m_history.invocations) {
    std::vector<std::pair<int, std::string>>().swap(invocation.records);
  }
}

std::string RecordJournal::markers(bool ended_too) const {
  std::string text;
  for (const auto& invocation : m_history.invocations) {
    text += marker('S', invocation.number, invocation.started);
    // An earlier invocation that never ended keeps counting as one (with its time) until this
    // one's summary counts it; its records were replayed into the store.
    text += marker(invocation.ended || ended_too ? 'E' : 'T', invocation.number, invocation.last_seen);
  }
  return text + marker('S', m_invocation, m_started);
}

void RecordJournal::compact() {
  if (m_fd < 0) {
    return;
  }
  std::string text = markers(/*ended_too=*/false);
  for (const auto& [time, line] : m_recent) {
    text += line;
  }
  if (const auto written = util::write_file_atomic(m_path, text); !written) {
    m_warn(fmt::format("warning: cannot compact the record journal {}: {}; it keeps growing", m_path.string(),
                       written.error().message));
    m_compact_bytes *= 2;  // not again at once
    return;
  }
  ::close(m_fd);  // the old file, renamed over
  m_fd = ::open(m_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  m_bytes = text.size();
  if (m_fd < 0) {
    m_warn(fmt::format("warning: cannot reopen the record journal {}: {}", m_path.string(), std::strerror(errno)));
  }
}

void RecordJournal::end() {
  if (m_fd < 0) {
    return;
  }
  ::close(m_fd);
  m_fd = -1;
  // Every record is in the store now: keep the markers (each invocation's start and end) only.
  const std::string text = markers(/*ended_too=*/true) + marker('E', m_invocation, unix_now());
  if (const auto written = util::write_file_atomic(m_path, text); !written) {
    m_warn(fmt::format("warning: cannot compact the record journal {}: {}", m_path.string(), written.error().message));
  }
}

void RecordJournal::write_line(const std::string& line) {
  std::string_view left = line;
  while (!left.empty()) {
    const ssize_t wrote = ::write(m_fd, left.data(), left.size());
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote <= 0) {
      m_warn(
          fmt::format("warning: cannot write the record journal {}: {}; it is no longer kept for this "
                      "invocation (the store still records every step)",
                      m_path.string(), std::strerror(errno)));
      ::close(m_fd);
      m_fd = -1;
      return;
    }
    left.remove_prefix(static_cast<std::size_t>(wrote));
    m_bytes += static_cast<std::size_t>(wrote);
  }
}

}  // namespace expctl::run
