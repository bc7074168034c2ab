#include "expctl/launch/launch_plan.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <sys/socket.h>
#include <unistd.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>

#include "expctl/launch/launch_error.hpp"

namespace expctl::launch {

namespace {

using util::LaunchError;

// The largest rank count we accept: far above any real node, small enough to catch typos
// (a world of a million processes is a mistyped number, not a cluster).
constexpr int k_max_processes_per_node = 4096;

}  // namespace

void validate_launch_request(const LaunchRequest& request) {
  EXPCTL_CHECK(request.nnodes >= 1, LaunchInputError, "--nnodes must be at least 1 (got {})", request.nnodes);
  EXPCTL_CHECK(request.node_rank >= 0 && request.node_rank < request.nnodes, LaunchInputError,
               "--node-rank {} is out of range for --nnodes {} (use 0..{})", request.node_rank, request.nnodes,
               request.nnodes - 1);
  EXPCTL_CHECK(request.nproc_per_node >= 1 && request.nproc_per_node <= k_max_processes_per_node, LaunchInputError,
               "distributed.nproc_per_node must be between 1 and {} (got {})", k_max_processes_per_node,
               request.nproc_per_node);
  EXPCTL_CHECK(request.master_port >= 0 && request.master_port <= 65535, LaunchInputError,
               "--master-port must be between 0 and 65535 (got {})", request.master_port);
  EXPCTL_CHECK(request.cores >= 0, LaunchInputError, "the core count must not be negative (got {})", request.cores);
  EXPCTL_CHECK(request.rendezvous_file.empty() || request.nnodes == 1, LaunchInputError,
               "a rendezvous file only works for a single node (got --nnodes {})", request.nnodes);
  if (request.nnodes > 1) {
    EXPCTL_CHECK(!request.master_addr.empty(), LaunchInputError,
                 "--master-addr is required with --nnodes {}: give every node the host name of node 0", request.nnodes);
    EXPCTL_CHECK(request.master_port != 0, LaunchInputError,
                 "--master-port is required with --nnodes {}: every node must use the same port", request.nnodes);
  }
}

namespace {

int omp_threads_for(const LaunchRequest& request, EnvOverrides& env) {
  const auto user_value = lookup(request.environment ? *request.environment : current_environment(), "OMP_NUM_THREADS");
  if (user_value) {
    env["OMP_NUM_THREADS"] = *user_value;  // kept as given: the user knows their machine
    try {
      return std::max(1, std::stoi(*user_value));
    } catch (const std::exception&) {
      return 1;
    }
  }
  const int cores = request.cores > 0 ? request.cores : available_cores();
  const int threads = std::max(1, cores / request.nproc_per_node);
  env["OMP_NUM_THREADS"] = std::to_string(threads);
  return threads;
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(1, CPU_COUNT(&set));
  }
  return std::max(1U, std::thread::hardware_concurrency());
}

uint16_t choose_free_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(address.c_str(), "0", &hints, &found);
  if (rc != 0) {
    throw LaunchInputError(
        fmt::format("cannot resolve the rendezvous address \"{}\": {}", address, ::gai_strerror(rc)));
  }
  std::string last_error = "no usable address";
  for (const addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    const int fd = ::socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, candidate->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    const bool ok = ::bind(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
    if (!ok) {
      last_error = std::strerror(errno);
    }
    ::close(fd);
    if (ok) {
      ::freeaddrinfo(found);
      const in_port_t port = bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port;
      return ntohs(port);
    }
  }
  ::freeaddrinfo(found);
  throw LaunchError(fmt::format("cannot find a free port on \"{}\": {}", address, last_error));
}

LaunchPlan make_launch_plan(const LaunchRequest& request) {
  validate_launch_request(request);
  LaunchPlan plan;
  plan.nnodes = request.nnodes;
  plan.node_rank = request.node_rank;
  plan.nproc_per_node = request.nproc_per_node;
  plan.world_size = request.nnodes * request.nproc_per_node;
  plan.master_addr = request.master_addr.empty() ? k_loopback_address : request.master_addr;
  plan.master_port =
      request.master_port != 0 ? static_cast<uint16_t>(request.master_port) : choose_free_port(plan.master_addr);
  EnvOverrides common;
  plan.omp_num_threads = omp_threads_for(request, common);
  common["WORLD_SIZE"] = std::to_string(plan.world_size);
  common["LOCAL_WORLD_SIZE"] = std::to_string(plan.nproc_per_node);
  common["GROUP_RANK"] = std::to_string(plan.node_rank);
  common["MASTER_ADDR"] = plan.master_addr;
  common["MASTER_PORT"] = std::to_string(plan.master_port);
  // Node 0's `expctl run` hosts the rendezvous store (train/store_server.hpp): every rank joins it
  // as a client, in torchrun's words.
  common["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  if (!request.rendezvous_file.empty()) {
    common["EXPCTL_RENDEZVOUS_FILE"] = request.rendezvous_file;
  }
  for (int local = 0; local < plan.nproc_per_node; ++local) {
    PlannedRank rank;
    rank.local_rank = local;
    rank.rank = plan.node_rank * plan.nproc_per_node + local;
    rank.env = common;
    rank.env["RANK"] = std::to_string(rank.rank);
    rank.env["LOCAL_RANK"] = std::to_string(local);
    plan.ranks.push_back(std::move(rank));
  }
  return plan;
}

LaunchPlan identity_plan(const RankIdentity& identity, std::optional<EnvMap> environment, int cores) {
  LaunchPlan plan;
  plan.nproc_per_node = identity.local_world_size;
  plan.nnodes = std::max(1, identity.world_size / std::max(1, identity.local_world_size));
  plan.node_rank = identity.node_rank;
  plan.world_size = identity.world_size;
  plan.master_addr = identity.master_addr;
  plan.master_port = identity.master_port;
  PlannedRank rank;
  rank.rank = identity.rank;
  rank.local_rank = identity.local_rank;
  LaunchRequest request;
  request.nproc_per_node = identity.local_world_size;
  request.environment = std::move(environment);
  request.cores = cores;
  plan.omp_num_threads = omp_threads_for(request, rank.env);
  rank.env["RANK"] = std::to_string(identity.rank);
  rank.env["LOCAL_RANK"] = std::to_string(identity.local_rank);
  rank.env["WORLD_SIZE"] = std::to_string(identity.world_size);
  rank.env["LOCAL_WORLD_SIZE"] = std::to_string(identity.local_world_size);
  rank.env["GROUP_RANK"] = std::to_string(identity.node_rank);
  rank.env["MASTER_ADDR"] = identity.master_addr;
  rank.env["MASTER_PORT"] = std::to_string(identity.master_port);
  plan.ranks.push_back(std::move(rank));
  return plan;
}

}  // namespace expctl::launch
