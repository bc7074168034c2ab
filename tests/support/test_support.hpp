#pragma once
/// Shared test helpers: a fresh temporary directory per test, and running the real binary.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expctl/util/subprocess.hpp"

namespace expctl::test {

/// A new empty directory under $TMPDIR, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }
  /// Writes `content` to `name` (creating parent directories) and returns the full path.
  std::filesystem::path write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path m_path;
};

/// Absolute path of the expctl binary under test.
std::string expctl_binary();

/// Absolute path of the source tree (for tests/data, experiments/, envs/).
std::filesystem::path source_dir();

/// A TCP connection to 127.0.0.1:`port` (a server under test), or -1. No Catch2 assertion inside:
/// safe from a test's own threads.
int connect_loopback(int port);

/// Reports the running test case as skipped, never passed: `need` is what is missing here, one
/// of the keys listed in docs/contributing.md, "Skips" (such as "postgres", "mount", "netns",
/// "root", "cores", "landlock", "tensorboard-reader", "fashion-mnist", "cuda"; add one there when
/// a test needs something new), and `reason` says why and how to provide
/// it. Prints "SKIPPED, not passed: <reason>" through WARN; the caller returns right after. The
/// shared main exits 77 (ctest: Skipped) only when no assertion of the test failed, before or
/// after this call (support/catch_main.cpp).
/// With EXPCTL_REQUIRE_ALL=1 (.ci/run) it fails the test instead, naming what is missing, unless
/// `need` is one of EXPCTL_ALLOWED_SKIPS (keys separated by spaces or commas).
void skip(const std::string& need, const std::string& reason);

/// EXPCTL_TEST_TIMEOUT_SCALE as a factor (an integer >= 1; 1 when unset or invalid): slow builds
/// (the asan preset sets 4) and loaded machines stretch every time limit a test sets with it.
int timeout_scale();

/// Runs `expctl args...` with EXPCTL_DB and NO_COLOR unset unless given in `env`.
util::SubprocessResult run_expctl(const std::vector<std::string>& args,
                                  const std::map<std::string, std::optional<std::string>>& env = {},
                                  const std::string& working_directory = {});

}  // namespace expctl::test
