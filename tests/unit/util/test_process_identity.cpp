#include <catch2/catch.hpp>

#include <cerrno>

#include <sys/wait.h>
#include <unistd.h>

#include "expctl/util/process_identity.hpp"

using namespace expctl::util;

namespace {

/// Forks a child that exits at once and returns its pid, still unreaped (a zombie).
pid_t fork_exited_child() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(0);
  }
  REQUIRE(pid > 0);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  return pid;
}

void reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

TEST_CASE("process identity: /proc/<pid>/stat is parsed after the last parenthesis") {
  const std::string tail = " 1 1 0 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 50";
  const auto stat = parse_proc_stat("4242 (evil) S 1 (name)) R" + tail);
  REQUIRE(stat.has_value());
  CHECK(stat->state == 'R');
  CHECK(stat->start_ticks == 987654);
  CHECK(parse_proc_stat("4242 (a b) Z" + tail)->state == 'Z');
  CHECK_FALSE(parse_proc_stat("4242 no parenthesis S 1").has_value());
  CHECK_FALSE(parse_proc_stat("4242 (short) S 1 2 3").has_value());
  CHECK_FALSE(parse_proc_stat("").has_value());
}

TEST_CASE("process identity: the current process is alive here and described as host:pid") {
  const ProcessIdentity self = ProcessIdentity::current();
  CHECK_FALSE(self.host.empty());
  CHECK(self.pid == ::getpid());
  CHECK(self.boot_id.size() == 36);  // a UUID
  CHECK(self.start_ticks > 0);
  CHECK(self.start_ticks == read_proc_stat(::getpid())->start_ticks);
  CHECK(self.liveness() == Liveness::alive);
  CHECK(self.is_alive_here());
  CHECK(self.display() == self.host + ":" + std::to_string(::getpid()));
}

TEST_CASE("process identity: a recycled pid, another boot or an exited process is dead here") {
  const ProcessIdentity self = ProcessIdentity::current();
  ProcessIdentity recycled = self;
  recycled.start_ticks += 1;  // same pid, started at another time: not the owner
  CHECK(recycled.liveness() == Liveness::dead);
  ProcessIdentity old_boot = self;
  old_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  CHECK(old_boot.liveness() == Liveness::dead);
  CHECK_FALSE(old_boot.is_alive_here());

  const pid_t child = fork_exited_child();
  ProcessIdentity exited = self;
  exited.pid = child;
  exited.start_ticks = read_proc_stat(child).value_or(ProcStat{}).start_ticks;
  CHECK(read_proc_stat(child)->state == 'Z');
  CHECK(exited.liveness() == Liveness::dead);  // a zombie has exited
  reap(child);
  CHECK_FALSE(read_proc_stat(child).has_value());
  CHECK(exited.liveness() == Liveness::dead);
}

TEST_CASE("process identity: a process of another host cannot be checked here") {
  ProcessIdentity other = ProcessIdentity::current();
  other.host += "-elsewhere";
  CHECK(other.liveness() == Liveness::unknown_elsewhere);
  CHECK_FALSE(other.is_alive_here());
  other.pid = 0;
  CHECK(other.liveness() == Liveness::unknown_elsewhere);
}
