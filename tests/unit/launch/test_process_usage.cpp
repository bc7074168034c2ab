#include <chrono>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <signal.h>

#include "expctl/launch/process_usage.hpp"

using namespace expctl::launch;

namespace {

void spin_for(std::chrono::milliseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  volatile unsigned long sink = 0;
  while (std::chrono::steady_clock::now() < until) {
    sink = sink + 1;
  }
}

}  // namespace

TEST_CASE("process usage: this process's CPU time grows by the time it spins, and its memory is resident") {
  const auto before = read_process_tree(::getpid());
  REQUIRE(before);
  CHECK(before->processes >= 1);
  CHECK(before->rss_bytes > 1024 * 1024);
  spin_for(std::chrono::milliseconds(300));
  const auto after = read_process_tree(::getpid());
  REQUIRE(after);
  CHECK(after->cpu_seconds - before->cpu_seconds >= 0.2);
}

TEST_CASE("process usage: a rank's children count (a DataLoader's workers), and a rank that is gone reads as none") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    spin_for(std::chrono::milliseconds(3000));
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  UsageRate rate;
  const auto start = UsageRate::Clock::now();
  CHECK(!rate.read(0, ::getpid(), start));  // a first reading has no interval yet
  const auto tree = read_process_tree(::getpid());
  REQUIRE(tree);
  CHECK(tree->processes >= 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto sample = rate.read(0, ::getpid(), UsageRate::Clock::now());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  REQUIRE(sample);
  // This process sleeps; its spinning child keeps about one core busy (less on a loaded machine).
  CHECK(sample->cpu_percent > 30.0);
  CHECK(sample->cpu_percent < 250.0);
  CHECK(sample->rss_mb > 1.0);
  CHECK(!read_process_tree(child));  // reaped: gone
  CHECK(!rate.read(1, child, UsageRate::Clock::now()));
}
