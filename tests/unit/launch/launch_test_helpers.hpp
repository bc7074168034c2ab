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

inline std::string data_file(const std::string& name) { return std::string(EXPCTL_LAUNCH_TEST_DATA) + "/" + name; }

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
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

/// Waits (up to `limit`) for a file to exist and returns its content.
inline std::string wait_for_file(const std::filesystem::path& path,
                                 std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(path) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return read_file(path);
}

/// Waits for a forked child (up to `limit`, then SIGKILL): its exit code, or -signal.
inline int wait_for_child(pid_t child, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1000;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

}  // namespace expctl::launch::test
