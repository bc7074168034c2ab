#pragma once
/// The launch plan: which local ranks this node starts and the environment each one gets,
/// following torchrun's contract (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT, GROUP_RANK), so a rank cannot tell expctl from torchrun.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "expctl/launch/environment.hpp"
#include "expctl/launch/rank_identity.hpp"

namespace expctl::launch {

/// Where rank 0's rendezvous listens when every rank runs on this machine.
inline constexpr const char* k_loopback_address = "127.0.0.1";

/// What the user asked for (`--nnodes`, `--node-rank`, `distributed.nproc_per_node`, ...).
struct LaunchRequest {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  /// Host of node 0; empty means loopback, which is only allowed for a single node.
  std::string master_addr;
  /// 0 = choose a free port (single node only: other nodes could not learn it).
  int master_port = 0;
  /// A single node's ranks meet in a c10d FileStore at this path instead of a TCP store
  /// (exported as EXPCTL_RENDEZVOUS_FILE); empty: TCP.
  std::string rendezvous_file;
  /// CPU cores to share among local ranks; 0 = the cores this process may run on.
  int cores = 0;
  /// The launching process's environment (nullopt: this process's): a user-set
  /// OMP_NUM_THREADS is kept.
  std::optional<EnvMap> environment;
};

/// One local rank: its identity and the variables it gets on top of the inherited environment.
struct PlannedRank {
  int rank = 0;        ///< global rank
  int local_rank = 0;  ///< index on this node
  EnvOverrides env;    ///< torchrun contract + OMP_NUM_THREADS
};

/// The validated plan for this node.
struct LaunchPlan {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  int world_size = 1;
  std::string master_addr;
  uint16_t master_port = 0;
  int omp_num_threads = 1;  ///< what the ranks get (the user's value when they set one)
  std::vector<PlannedRank> ranks;
};

/// The plan of the one rank this process is under an external launcher: torchrun's variables for
/// `identity` (whichever launcher it came from), so a program started in this process's place
/// sees torchrun's contract under mpirun, srun or Kubeflow too. OMP_NUM_THREADS as make_launch_plan
/// sets it (the user's value, else the cores shared among the node's ranks).
/// `environment` and `cores` as in LaunchRequest (tests pass them; nullopt/0: this process's).
LaunchPlan identity_plan(const RankIdentity& identity, std::optional<EnvMap> environment = std::nullopt,
                         int cores = 0);

/// Validates `request` and builds the plan. Throws util::LaunchError (exit code "usage") naming
/// the bad option; throws util::LaunchError (run failed) when no free port can be found.
LaunchPlan make_launch_plan(const LaunchRequest& request);

/// The checks make_launch_plan starts with (ranges, --master-addr/--master-port with several
/// nodes); throws LaunchInputError (exit 2) naming the option.
void validate_launch_request(const LaunchRequest& request);

/// Binds port 0 on `address` (a numeric IPv4/IPv6 address or a host name), reads back the port
/// the kernel chose and releases it. The port is free now; another process could still take it
/// before rank 0 binds it (the same race torchrun's --standalone accepts).
uint16_t choose_free_port(const std::string& address);

/// Number of CPU cores this process may run on (its affinity mask), at least 1.
int available_cores();

}  // namespace expctl::launch
