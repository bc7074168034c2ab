#include <csignal>

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "expctl/launch/control_channel.hpp"
#include "expctl/launch/launch_error.hpp"
#include "expctl/launch/rank_channel.hpp"

using namespace expctl::launch;

namespace {

std::string read_available(int fd) {
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(n));
  return text;
}

}  // namespace

TEST_CASE("rank channel: heartbeats and records are lines on the control fd", "[launch][channel]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  EnvMap env = {{"EXPCTL_CONTROL_FD", std::to_string(fds[1])},
                {"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"LOCAL_RANK", "1"},
                {"LOCAL_WORLD_SIZE", "2"},
                {"GROUP_RANK", "0"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "29511"}};
  RankChannel channel = RankChannel::from_environment(env);
  CHECK(channel.connected());
  CHECK(channel.identity() == RankIdentity{1, 2, 1, 2, 0, "127.0.0.1", 29511, "expctl"});
  CHECK((::fcntl(fds[1], F_GETFD) & FD_CLOEXEC) != 0);
  channel.heartbeat();
  channel.record("{\"step\": 1,\n \"loss\": 0.5}");
  CHECK(read_available(fds[0]) == "heartbeat\nrecord {\"step\": 1,  \"loss\": 0.5}\n");
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("rank channel: the supervisor's parser reads what the channel writes", "[launch][channel]") {
  CHECK(parse_control_line("heartbeat").kind == ControlKind::heartbeat);
  const ControlMessage record = parse_control_line("record {\"a\":1}");
  CHECK(record.kind == ControlKind::record);
  CHECK(record.payload == "{\"a\":1}");
  CHECK(parse_control_line("progress 3/10").kind == ControlKind::unknown);
}

TEST_CASE("rank channel: without a supervisor it is a no-op single process", "[launch][channel]") {
  RankChannel channel = RankChannel::from_environment({{"PATH", "/usr/bin"}});
  CHECK_FALSE(channel.connected());
  CHECK(channel.identity() == RankIdentity{0, 1, 0, 1, 0, "127.0.0.1", k_default_master_port, "none"});
  channel.heartbeat();
  channel.record("{}");
}

TEST_CASE("rank channel: a bad EXPCTL_CONTROL_FD is named", "[launch][channel]") {
  CHECK_THROWS_MATCHES(RankChannel::from_environment({{"EXPCTL_CONTROL_FD", "999"}}), LaunchInputError,
                       Catch::Message("EXPCTL_CONTROL_FD=\"999\" is not an open file descriptor: start this rank "
                                      "with expctl, or unset EXPCTL_CONTROL_FD"));
}

TEST_CASE("rank channel: a vanished supervisor disconnects it without SIGPIPE", "[launch][channel]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);
  RankChannel channel(fds[1], RankIdentity{});
  channel.heartbeat();  // would kill the test process with SIGPIPE if it were not handled
  CHECK_FALSE(channel.connected());
  sigset_t pending;
  sigpending(&pending);
  CHECK(sigismember(&pending, SIGPIPE) == 0);
  ::close(fds[1]);
}
