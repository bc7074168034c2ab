#include <cerrno>

#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <netinet/in.h>

#include "expctl/launch/launch_error.hpp"
#include "expctl/launch/launch_plan.hpp"

using namespace expctl::launch;

namespace {

std::string env_of(const PlannedRank& rank, const std::string& name) {
  const auto it = rank.env.find(name);
  return it == rank.env.end() || !it->second ? "<unset>" : *it->second;
}

std::string error_of(const LaunchRequest& request) {
  try {
    make_launch_plan(request);
  } catch (const LaunchInputError& error) {
    CHECK(error.exit_code() == expctl::util::ExitCode::usage);
    return error.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("launch plan: second node of two gets global ranks and torchrun's variables", "[launch][plan]") {
  LaunchRequest request;
  request.nnodes = 2;
  request.node_rank = 1;
  request.nproc_per_node = 2;
  request.master_addr = "node01";
  request.master_port = 29400;
  request.cores = 8;
  request.environment = EnvMap{};
  const LaunchPlan plan = make_launch_plan(request);
  CHECK(plan.world_size == 4);
  REQUIRE(plan.ranks.size() == 2);
  for (int local = 0; local < 2; ++local) {
    const PlannedRank& rank = plan.ranks[static_cast<size_t>(local)];
    CHECK(rank.rank == 2 + local);
    CHECK(rank.local_rank == local);
    CHECK(env_of(rank, "RANK") == std::to_string(2 + local));
    CHECK(env_of(rank, "LOCAL_RANK") == std::to_string(local));
    CHECK(env_of(rank, "WORLD_SIZE") == "4");
    CHECK(env_of(rank, "LOCAL_WORLD_SIZE") == "2");
    CHECK(env_of(rank, "GROUP_RANK") == "1");
    CHECK(env_of(rank, "MASTER_ADDR") == "node01");
    CHECK(env_of(rank, "MASTER_PORT") == "29400");
    CHECK(env_of(rank, "OMP_NUM_THREADS") == "4");
    CHECK(env_of(rank, "TORCHELASTIC_USE_AGENT_STORE") == "True");  // node 0's expctl hosts the store
  }
}

TEST_CASE("launch plan: a single node rendezvouses on loopback at a free port", "[launch][plan]") {
  LaunchRequest request;
  request.nproc_per_node = 3;
  request.cores = 8;
  request.environment = EnvMap{};
  const LaunchPlan plan = make_launch_plan(request);
  CHECK(plan.master_addr == "127.0.0.1");
  CHECK(plan.master_port != 0);
  CHECK(env_of(plan.ranks[2], "MASTER_PORT") == std::to_string(plan.master_port));
  CHECK(plan.omp_num_threads == 2);  // 8 cores / 3 ranks, rounded down
}

TEST_CASE("launch plan: a single node's ranks can be pointed at a rendezvous file", "[launch][plan]") {
  LaunchRequest request;
  request.nproc_per_node = 2;
  request.environment = EnvMap{};
  CHECK(env_of(make_launch_plan(request).ranks[0], "EXPCTL_RENDEZVOUS_FILE") == "<unset>");
  request.rendezvous_file = "/tmp/expctl-rendezvous-abc123";
  const LaunchPlan plan = make_launch_plan(request);
  for (const auto& rank : plan.ranks) {
    CHECK(env_of(rank, "EXPCTL_RENDEZVOUS_FILE") == "/tmp/expctl-rendezvous-abc123");
  }
  request.nnodes = 2;
  request.master_addr = "node0";
  request.master_port = 29400;
  CHECK(error_of(request) == "a rendezvous file only works for a single node (got --nnodes 2)");
}

TEST_CASE("launch plan: an external launcher's rank gets torchrun's variables for a program in its place",
          "[launch][plan]") {
  RankIdentity identity;  // rank 5 of 8 under mpirun, 4 per node
  identity.rank = 5;
  identity.world_size = 8;
  identity.local_rank = 1;
  identity.local_world_size = 4;
  identity.node_rank = 1;
  identity.master_addr = "node01";
  identity.master_port = 29400;
  identity.launcher = "mpirun";
  const LaunchPlan plan = identity_plan(identity, EnvMap{}, 8);
  CHECK(plan.world_size == 8);
  CHECK(plan.nnodes == 2);
  REQUIRE(plan.ranks.size() == 1);
  const PlannedRank& rank = plan.ranks[0];
  CHECK(rank.rank == 5);
  CHECK(rank.local_rank == 1);
  for (const auto& [name, value] : {std::pair{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"},
                                    {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"}, {"MASTER_ADDR", "node01"},
                                    {"MASTER_PORT", "29400"}, {"OMP_NUM_THREADS", "2"}}) {
    CHECK(env_of(rank, name) == value);
  }
  // Who hosts the store is the program runner's choice (run/program.hpp), not the plan's.
  CHECK(env_of(rank, "TORCHELASTIC_USE_AGENT_STORE") == "<unset>");
  CHECK(env_of(identity_plan(identity, EnvMap{{"OMP_NUM_THREADS", "3"}}, 8).ranks[0], "OMP_NUM_THREADS") == "3");
}

TEST_CASE("launch plan: OMP_NUM_THREADS is at least 1 and a user's value is kept", "[launch][plan]") {
  LaunchRequest request;
  request.nproc_per_node = 4;
  request.cores = 2;
  request.environment = EnvMap{};
  CHECK(env_of(make_launch_plan(request).ranks[0], "OMP_NUM_THREADS") == "1");
  request.environment = EnvMap{{"OMP_NUM_THREADS", "7"}};
  const LaunchPlan plan = make_launch_plan(request);
  CHECK(env_of(plan.ranks[3], "OMP_NUM_THREADS") == "7");
  CHECK(plan.omp_num_threads == 7);
}

TEST_CASE("launch plan: bad requests are usage errors naming the option", "[launch][plan]") {
  LaunchRequest request;
  request.nnodes = 2;
  request.node_rank = 2;
  request.master_addr = "node01";
  request.master_port = 29500;
  CHECK(error_of(request) == "--node-rank 2 is out of range for --nnodes 2 (use 0..1)");
  request.node_rank = 0;
  request.master_addr.clear();
  CHECK(error_of(request) == "--master-addr is required with --nnodes 2: give every node the host name of node 0");
  request.master_addr = "node01";
  request.master_port = 0;
  CHECK(error_of(request) == "--master-port is required with --nnodes 2: every node must use the same port");
  request = LaunchRequest{};
  request.nnodes = 0;
  CHECK(error_of(request) == "--nnodes must be at least 1 (got 0)");
  request = LaunchRequest{};
  request.nproc_per_node = 0;
  CHECK(error_of(request) == "distributed.nproc_per_node must be between 1 and 4096 (got 0)");
  request = LaunchRequest{};
  request.master_port = 70000;
  CHECK(error_of(request) == "--master-port must be between 0 and 65535 (got 70000)");
}

TEST_CASE("launch plan: the chosen port can be bound right away", "[launch][plan]") {
  const uint16_t port = choose_free_port("127.0.0.1");
  REQUIRE(port != 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  ::close(fd);
}

TEST_CASE("launch plan: an unresolvable rendezvous host is named", "[launch][plan]") {
  CHECK_THROWS_WITH(choose_free_port("no-such-host.invalid"),
                    Catch::StartsWith("cannot resolve the rendezvous address \"no-such-host.invalid\": "));
}
