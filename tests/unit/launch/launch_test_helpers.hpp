#pragma once
/// Helpers for the launch tests: a temporary folder, fake-rank scripts, and checks that a
/// process is really gone.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

namespace expctl::launch::test {

/// A fresh folder under $TMPDIR, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    m_path = std::filesystem::temp_directory_path() / fmt::format("expctl-launch-{:08x}{:08x}", device(), device());
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }
  std::string operator/(const std::string& name) const { return (m_path / name).string(); }

 private:
  std::filesystem::path m_path;
};

inline std::string data_file(const std::string& name) {
  return std::string(EXPCTL_LAUNCH_TEST_DATA) + "/" + name;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// True when `pid` no longer runs: no such process, or a zombie of a parent that is not ours.
inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) == -1 && errno == ESRCH) {
    return true;
  }
  const std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

/// Waits (up to `limit`) for `pid` to disappear; a guard against hanging, not a timing check.
inline bool wait_until_gone(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Waits (up to `limit`) for a file to have content and returns it.
inline std::string wait_for_file(const std::filesystem::path& path,
                                 std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string content = read_file(path);
  while (content.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    content = read_file(path);
  }
  return content;
}

/// A forked child of the test: killed with SIGKILL (its ranks then die of their parent-death
/// signal) when a failed check ends the test before the child was waited for.
class ForkedChild {
 public:
  explicit ForkedChild(pid_t pid) : m_pid(pid) {}
  ~ForkedChild() {
    if (m_pid > 0) {
      ::kill(m_pid, SIGKILL);
      ::waitpid(m_pid, nullptr, 0);
    }
  }
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;
  pid_t pid() const { return m_pid; }

  /// Waits (up to `limit`, then SIGKILL): the exit code, or -signal.
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(m_pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, &status, 0);
        m_pid = -1;
        return -1000;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    m_pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

 private:
  pid_t m_pid;
};

}  // namespace expctl::launch::test
