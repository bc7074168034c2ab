#pragma once
/// Internal to run/: the nodes of a `run --slurm` job of several nodes (slurm_nodes.cpp).

#include <optional>
#include <string>
#include <vector>

#include "expctl/run/lifecycle.hpp"

namespace expctl::run::lifecycle {

/// The port node 0's rendezvous listens on when neither the spec (distributed.master_port) nor
/// MASTER_PORT names one: 20000 + job id mod 20000, the same on every node and every start of the
/// job.
int slurm_node_port(const std::string& job);

/// This process's node of the job: `submitted` (the run's resolved launch) with the node rank and
/// node 0's address as launch::detect_launcher reads an srun task (SLURM_NODEID; MASTER_ADDR, else
/// the first host of the step's node list), and the port from MASTER_PORT, else the spec's, else
/// slurm_node_port. One node: rank 0, a private store. Throws a util::Failure of one line naming
/// what is missing or wrong.
launch::LaunchRequest slurm_node(const launch::LaunchRequest& submitted, const std::string& job);

/// The tag of node I's run (I > 0): "node-of:<node 0's run>"; and the run it names, if any.
std::string node_of_tag(const std::string& head_run);
std::optional<std::string> head_of(const store::RunRecord& run);

/// The runs of nodes 1..N-1 of `head_run` recorded so far.
std::vector<store::RunRecord> node_runs(const store::Store& store, const std::string& head_run);

/// Node `node_rank`'s run of `head` (node 0's run): the one recorded at an earlier start of the
/// job (tagged `job` too now), or a new one recorded `queued` with `resolved` for this node.
store::RunRecord node_run(store::Store& store, const store::RunRecord& head, const ResolvedRun& resolved, int node_rank,
                          const std::string& job);

}  // namespace expctl::run::lifecycle
