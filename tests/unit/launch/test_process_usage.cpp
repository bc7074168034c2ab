#include <chrono>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <thread>
#include <vector>

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

// Spins until this process has used `seconds` of CPU time (however long a loaded machine makes that).
void spin_cpu(double seconds) {
  const auto used = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  const double until = used() + seconds;
  volatile unsigned long sink = 0;
  while (used() < until) {
    sink = sink + 1;
  }
}

}  // namespace

TEST_CASE("process usage: this process's CPU time grows by the time it spins, and its memory is resident") {
  const auto before = read_process_tree(::getpid());
  REQUIRE(before);
  CHECK(before->processes >= 1);
  CHECK(before->rss_bytes > 1024 * 1024);
  spin_cpu(0.3);
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

TEST_CASE("process usage: a rank that has exited but is not reaped yet reads as gone, not as 0 MB") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::_exit(0);
  }
  // A zombie until reaped: /proc still lists it, its CPU time is final and its memory gone.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  const auto zombie = read_process_tree(child);
  UsageRate rate;
  const auto sample = rate.read(0, child, UsageRate::Clock::now());
  ::waitpid(child, nullptr, 0);
  CHECK(!zombie);
  CHECK(!sample);
}

TEST_CASE("process usage: a tree's GPU share is its processes' device memory and their devices' mean utilization") {
  GpuReading reading;
  reading.utilization = {50u, 90u, std::nullopt};
  reading.by_pid[10] = {{0, 100ULL << 20}};
  reading.by_pid[11] = {{1, 50ULL << 20}, {2, 10ULL << 20}};  // one process on two devices
  reading.by_pid[99] = {{1, 1ULL << 30}};                     // another rank's
  const std::vector<pid_t> tree{10, 11, 12};
  const auto share = reading.of_tree(tree);
  REQUIRE(share);
  CHECK(share->mem_mb == Approx(160.0));
  CHECK(share->percent == Approx((50.0 + 90.0 + 0.0) / 3));  // a device NVML gives no rate for reads 0
  const std::vector<pid_t> cpu_only{12, 13};
  CHECK_FALSE(reading.of_tree(cpu_only));  // none of its processes on a GPU: no GPU series
}

TEST_CASE("process usage: with NVML (a stand-in library), a rank on a GPU gets its memory and the device's rate") {
  ::setenv("EXPCTL_NVML_LIBRARY", EXPCTL_TEST_FAKE_NVML, 1);
  ::setenv("FAKE_NVML_UTILIZATION", "37", 1);
  const pid_t child = ::fork();  // the stand-in says every child of this process computes on its GPU
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  GpuUsage gpu;
  const auto reading = gpu.read();
  UsageRate rate;
  CHECK(!rate.read(0, child, UsageRate::Clock::now(), reading ? &*reading : nullptr));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto sample = rate.read(0, child, UsageRate::Clock::now(), reading ? &*reading : nullptr);
  const auto self = rate.read(1, ::getpid(), UsageRate::Clock::now(), reading ? &*reading : nullptr);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::unsetenv("EXPCTL_NVML_LIBRARY");
  ::unsetenv("FAKE_NVML_UTILIZATION");
  REQUIRE(reading);
  CHECK(reading->utilization == std::vector<std::optional<unsigned int>>{37u});
  REQUIRE(sample);
  CHECK(sample->gpu_percent == Approx(37.0));
  CHECK(sample->gpu_mem_mb == Approx(123.0));
  CHECK(!self);  // a first reading of that rank
  // Without the library: no reading, nothing loaded, no error.
  ::setenv("EXPCTL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  GpuUsage absent;
  CHECK_FALSE(absent.read());
  ::unsetenv("EXPCTL_NVML_LIBRARY");
}
