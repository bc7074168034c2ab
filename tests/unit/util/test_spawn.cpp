// The one spawner (util/spawn.hpp) that ranks, sweep points and captured commands start through,
// and the one handler of the interrupting signals (util/interrupt_signals.hpp).
#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/interrupt_signals.hpp"
#include "expctl/util/spawn.hpp"

extern char** environ;

using namespace expctl;

namespace {

std::vector<std::string> this_environment() {
  std::vector<std::string> out;
  for (char** entry = ::environ; *entry != nullptr; ++entry) {
    out.emplace_back(*entry);
  }
  return out;
}

/// Runs `script` with sh: stdin /dev/null, stdout and stderr to a file; returns its output and wait status.
std::pair<std::string, int> run_sh(const std::string& script, util::SpawnOptions options = {}) {
  const test::TempDir dir;
  const auto output = dir / "out";
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  options.argv = {"sh", "-c", script};
  options.environment = this_environment();
  options.fds = {null, out, out};
  auto child = util::ChildProcess::spawn(options);
  ::close(null);
  ::close(out);
  REQUIRE(child.has_value());
  const int status = child->wait();
  return {util::read_file(output).value_or(""), status};
}

}  // namespace

TEST_CASE("spawn: the child leads a process group of its own and gets exactly the descriptors it is given") {
  const int stray = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: a fork would inherit it
  REQUIRE(stray >= 0);
  const auto [output, status] = run_sh(
      "[ $(cut -d' ' -f5 /proc/$$/stat) = $$ ] && echo leader; "
      "[ -e /proc/$$/fd/" +
      std::to_string(stray) + " ] && echo stray; [ -e /proc/$$/fd/2 ] && echo stderr");
  ::close(stray);
  CHECK(output == "leader\nstderr\n");
  CHECK(util::exit_code_of_status(status) == 0);
}

TEST_CASE("spawn: the working directory and the CPU affinity are the child's") {
  const test::TempDir dir;
  const auto [output, status] = run_sh("pwd; grep Cpus_allowed_list /proc/self/status | tr -d '\\t '",
                                       {.working_directory = dir.path(), .cpus = {0}});
  CHECK(output == std::filesystem::canonical(dir.path()).string() + "\nCpus_allowed_list:0\n");
}

TEST_CASE("spawn: a signal the parent ignores is back to its default in the child") {
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGTERM, &ignore, &previous);
  const auto [output, status] = run_sh("kill -TERM $$; echo survived");
  ::sigaction(SIGTERM, &previous, nullptr);
  CHECK(output.empty());
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(util::exit_code_of_status(status) == 128 + SIGTERM);
}

TEST_CASE("spawn: the pidfd turns readable when the child ends, and a program that cannot run is an exec error") {
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  auto child = util::ChildProcess::spawn({.argv = {"sh", "-c", "exit 7"}, .fds = {null, null, null}});
  REQUIRE(child.has_value());
  REQUIRE(child->pidfd() >= 0);
  pollfd entry{child->pidfd(), POLLIN, 0};
  CHECK(::poll(&entry, 1, 10000) == 1);
  const auto status = child->try_wait();
  REQUIRE(status.has_value());
  CHECK(util::exit_code_of_status(*status) == 7);
  CHECK_FALSE(child->running());

  const auto missing = util::ChildProcess::spawn({.argv = {"/nonexistent/program"}, .fds = {null, null, null}});
  ::close(null);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().call == "exec");
  CHECK(missing.error().error == ENOENT);
}

TEST_CASE("spawn: destroying a running child kills its whole group") {
  const test::TempDir dir;
  const auto pid_file = dir / "grandchild";
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t grandchild = 0;
  {
    auto child = util::ChildProcess::spawn(
        {.argv = {"sh", "-c", "sleep 30 & echo $! > " + pid_file.string() + "; wait"}, .fds = {null, null, null}});
    REQUIRE(child.has_value());
    // Up to 10 s (times EXPCTL_TEST_TIMEOUT_SCALE) for sh to start on a loaded machine; it
    // usually takes milliseconds, and the loop ends as soon as the file is there.
    for (int i = 0; i < 1000 * test::timeout_scale() && util::read_file(pid_file).value_or("").empty(); ++i) {
      ::usleep(10000);
    }
    grandchild = std::stoi(util::read_file(pid_file).value_or("0"));
    REQUIRE(grandchild > 0);
  }
  ::close(null);
  // The grandchild is not ours to reap (init adopts it), so wait until /proc shows it gone or a zombie.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    const auto stat = util::read_file("/proc/" + std::to_string(grandchild) + "/stat");
    gone = !stat || stat->find(") Z") != std::string::npos;
    ::usleep(10000);
  }
  CHECK(gone);
}

namespace {
volatile std::sig_atomic_t g_hooked = 0;
extern "C" void count_hook(int signal) {
  g_hooked = signal;
}
}  // namespace

TEST_CASE("interrupt signals: the hook runs, the pipe carries the signal, and the old handler comes back") {
  struct sigaction before {};
  ::sigaction(SIGHUP, nullptr, &before);
  {
    util::InterruptSignals signals(count_hook);
    ::raise(SIGHUP);
    CHECK(g_hooked == SIGHUP);
    CHECK(signals.take() == std::vector<int>{SIGHUP});
    CHECK(signals.take().empty());
    CHECK_THROWS(util::InterruptSignals());  // one owner per process
  }
  struct sigaction after {};
  ::sigaction(SIGHUP, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
}
