#pragma once
/// Who am I? When expctl runs as one rank of a job started by someone else (torchrun
/// `--no-python`, mpirun, Slurm srun, or expctl's own supervisor), the launcher's environment
/// variables say which rank this process is and where rank 0's rendezvous listens.
///
/// Launchers are tried in this order; the first whose marker variable is set claims the process:
///   1. torchrun / expctl  RANK (expctl when EXPCTL_CONTROL_FD is set too)
///   2. Kubeflow PyTorchJob (Training Operator v1)  RANK without LOCAL_RANK in a Kubernetes pod
///      (KUBERNETES_SERVICE_HOST): one rank per pod, RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
///   3. Kubeflow Trainer v2  PET_NODE_RANK (with PET_NNODES, PET_NPROC_PER_NODE = 1, PET_MASTER_*)
///   4. Open MPI mpirun    OMPI_COMM_WORLD_RANK
///   5. MPICH/Hydra (PMI)  PMI_RANK
///   6. Slurm srun         SLURM_PROCID together with SLURM_STEP_ID (a task of a job step)
/// A Kubeflow pod of several ranks (PET_NPROC_PER_NODE > 1) is refused with the torchrun command
/// that runs them: expctl under torchrun is then a torchrun rank.
/// Explicit per-rank launchers come first because they also run inside Slurm allocations, where
/// SLURM_* describe the allocation or the launcher's own helper processes rather than the ranks.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "expctl/launch/environment.hpp"

namespace expctl::launch {

/// torchrun's default port, used when a launcher gives no MASTER_PORT (every rank must agree,
/// so no free port can be chosen on the spot).
inline constexpr uint16_t k_default_master_port = 29500;

/// This process's place in a distributed job.
struct RankIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = k_default_master_port;
  std::string launcher;  ///< "expctl", "torchrun", "kubeflow-pytorchjob", "kubeflow-trainer", "mpirun", "pmi" or "slurm"
  /// The launcher hosts the rendezvous store and every rank, rank 0 included, joins it as a
  /// client (torchrun's TORCHELASTIC_USE_AGENT_STORE=True; expctl's supervisor sets it too).
  bool agent_store = false;
  /// expctl's single-node ranks meet in a c10d FileStore at this path (EXPCTL_RENDEZVOUS_FILE)
  /// instead of a TCP store; empty otherwise.
  std::string rendezvous_file{};

  bool operator==(const RankIdentity&) const = default;
};

/// One row of the launcher table (for docs and `--help`).
struct LauncherInfo {
  std::string_view name;
  std::string_view marker;     ///< the variable whose presence means "started by this launcher"
  std::string_view variables;  ///< what is read, for messages and docs
};

/// The launchers in precedence order.
std::span<const LauncherInfo> launchers();

/// The identity given by the first launcher (in precedence order) that claims `env`, or nullopt
/// when none does (expctl then starts its ranks itself). Throws LaunchInputError (exit 2) naming
/// the variable when a claiming launcher's variables are missing, malformed or inconsistent.
std::optional<RankIdentity> detect_launcher(const EnvMap& env);

}  // namespace expctl::launch
