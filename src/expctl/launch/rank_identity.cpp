#include "expctl/launch/rank_identity.hpp"

#include <charconv>

#include <fmt/format.h>

#include "expctl/launch/hostlist.hpp"
#include "expctl/launch/launch_error.hpp"

namespace expctl::launch {

namespace {

constexpr LauncherInfo k_launchers[] = {
    {"torchrun", "RANK", "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT"},
    {"kubeflow-pytorchjob", "RANK",
     "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (pod level, no LOCAL_RANK, in a Kubernetes pod: "
     "KUBERNETES_SERVICE_HOST); PET_NPROC_PER_NODE and PET_NNODES when set"},
    {"kubeflow-trainer", "PET_NODE_RANK", "PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT"},
    {"mpirun", "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, "
     "MASTER_ADDR, MASTER_PORT"},
    {"pmi", "PMI_RANK", "PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS, MASTER_ADDR, MASTER_PORT"},
    {"slurm", "SLURM_PROCID",
     "SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE (or "
     "SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE), SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), MASTER_ADDR, "
     "MASTER_PORT"},
};

// Reads one launcher's variables; every error names the launcher and the variable.
class LauncherEnv {
 public:
  LauncherEnv(const EnvMap& env, const LauncherInfo& info) : m_env(env), m_info(info) {}

  bool has(const std::string& name) const { return m_env.count(name) != 0; }
  std::optional<std::string> text(const std::string& name) const { return lookup(m_env, name); }

  std::string required(const std::string& name) const {
    const auto value = text(name);
    if (!value) {
      fail(fmt::format("{} is set but {} is not (a {} rank needs {})", m_info.marker, name, m_info.name,
                       m_info.variables));
    }
    return *value;
  }

  int integer(const std::string& name) const { return parse(name, required(name)); }

  std::optional<int> optional_integer(const std::string& name) const {
    const auto value = text(name);
    return value ? std::optional<int>(parse(name, *value)) : std::nullopt;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw LaunchInputError(fmt::format("{}: {}", m_info.name, message));
  }

 private:
  int parse(const std::string& name, const std::string& value) const {
    int out = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || out < 0) {
      fail(fmt::format("{}=\"{}\" is not a non-negative integer", name, value));
    }
    return out;
  }

  const EnvMap& m_env;
  const LauncherInfo& m_info;
};

void check_consistent(const LauncherEnv& env, const RankIdentity& id, std::string_view rank_var,
                      std::string_view size_var, std::string_view local_var, std::string_view local_size_var) {
  if (id.world_size < 1)
    env.fail(fmt::format("{}={} must be at least 1", size_var, id.world_size));
  if (id.rank >= id.world_size) {
    env.fail(fmt::format("{}={} is not below {}={}", rank_var, id.rank, size_var, id.world_size));
  }
  if (id.local_world_size < 1 || id.local_world_size > id.world_size) {
    env.fail(
        fmt::format("{}={} must be between 1 and {}={}", local_size_var, id.local_world_size, size_var, id.world_size));
  }
  if (id.local_rank >= id.local_world_size) {
    env.fail(fmt::format("{}={} is not below {}={}", local_var, id.local_rank, local_size_var, id.local_world_size));
  }
}

uint16_t read_port(const LauncherEnv& env, int port) {
  if (port < 1 || port > 65535)
    env.fail(fmt::format("MASTER_PORT={} is not a TCP port", port));
  return static_cast<uint16_t>(port);
}

// MPI launchers do not publish rank 0's host: it must be exported to every rank, except when the
// whole job runs on this node.
void read_rendezvous(const LauncherEnv& env, RankIdentity& id, const std::string& export_hint) {
  if (const auto addr = env.text("MASTER_ADDR")) {
    id.master_addr = *addr;
  } else if (id.local_world_size != id.world_size) {
    env.fail(
        fmt::format("MASTER_ADDR is not set: {} does not tell a rank where rank 0 runs; export the host of "
                    "rank 0 to every rank ({})",
                    id.launcher, export_hint));
  }
  if (const auto port = env.optional_integer("MASTER_PORT")) {
    id.master_port = read_port(env, *port);
  }
}

// A pod of a Kubeflow PyTorchJob has RANK and WORLD_SIZE but no LOCAL_RANK (torchrun always sets
// it): the kubeflow-pytorchjob row reads such a pod.
bool is_pytorchjob_pod(const LauncherEnv& env) {
  return !env.has("LOCAL_RANK") && !env.has("EXPCTL_CONTROL_FD") && env.has("KUBERNETES_SERVICE_HOST");
}

std::optional<RankIdentity> read_torchrun(const LauncherEnv& env) {
  if (is_pytorchjob_pod(env)) {
    return std::nullopt;
  }
  RankIdentity id;
  id.launcher = env.has("EXPCTL_CONTROL_FD") ? "expctl" : "torchrun";
  id.rank = env.integer("RANK");
  id.world_size = env.integer("WORLD_SIZE");
  id.local_rank = env.integer("LOCAL_RANK");
  id.local_world_size = env.integer("LOCAL_WORLD_SIZE");
  id.node_rank = env.integer("GROUP_RANK");
  id.master_addr = env.required("MASTER_ADDR");
  id.master_port = read_port(env, env.integer("MASTER_PORT"));
  id.agent_store = env.text("TORCHELASTIC_USE_AGENT_STORE") == "True";
  if (id.launcher == "expctl") {
    id.rendezvous_file = env.text("EXPCTL_RENDEZVOUS_FILE").value_or("");
  }
  check_consistent(env, id, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return id;
}

// Several ranks per pod need a per-node launcher in the pod: that is torchrun's job, which reads the
// same PET_* variables; expctl under it is then a torchrun rank.
void require_one_rank_per_pod(const LauncherEnv& env, const std::string& procs, const std::string& master) {
  if (procs == "1") {
    return;
  }
  env.fail(fmt::format(
      "PET_NPROC_PER_NODE=\"{}\": this pod is one node of several ranks, and expctl runs one rank per pod here; set "
      "the job's processes per node to 1, or make torchrun the container's command: torchrun "
      "--nnodes=$PET_NNODES --nproc-per-node=$PET_NPROC_PER_NODE --node-rank=$PET_NODE_RANK "
      "--master-addr=${} --master-port=${} --no-python expctl run SPEC",
      procs, master + "_ADDR", master + "_PORT"));
}

std::optional<RankIdentity> read_pytorchjob(const LauncherEnv& env) {
  if (!is_pytorchjob_pod(env)) {
    return std::nullopt;
  }
  require_one_rank_per_pod(env, env.text("PET_NPROC_PER_NODE").value_or("1"), "MASTER");
  RankIdentity id;
  id.launcher = "kubeflow-pytorchjob";
  id.rank = env.integer("RANK");
  id.world_size = env.integer("WORLD_SIZE");
  id.node_rank = id.rank;  // one rank per pod: the pod's index is the rank
  id.master_addr = env.required("MASTER_ADDR");
  id.master_port = read_port(env, env.integer("MASTER_PORT"));
  if (const auto nodes = env.optional_integer("PET_NNODES"); nodes && *nodes != id.world_size) {
    env.fail(fmt::format("PET_NNODES={} and WORLD_SIZE={} disagree: with one rank per pod they are the number of "
                         "pods",
                         *nodes, id.world_size));
  }
  check_consistent(env, id, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return id;
}

std::optional<RankIdentity> read_trainer(const LauncherEnv& env) {
  require_one_rank_per_pod(env, env.required("PET_NPROC_PER_NODE"), "PET_MASTER");
  RankIdentity id;
  id.launcher = "kubeflow-trainer";
  id.rank = env.integer("PET_NODE_RANK");
  id.world_size = env.integer("PET_NNODES");
  id.node_rank = id.rank;
  id.master_addr = env.required("PET_MASTER_ADDR");
  id.master_port = read_port(env, env.integer("PET_MASTER_PORT"));
  check_consistent(env, id, "PET_NODE_RANK", "PET_NNODES", "LOCAL_RANK", "PET_NPROC_PER_NODE");
  return id;
}

std::optional<RankIdentity> read_open_mpi(const LauncherEnv& env) {
  RankIdentity id;
  id.launcher = "mpirun";
  id.rank = env.integer("OMPI_COMM_WORLD_RANK");
  if (const auto pmi = env.optional_integer("PMI_RANK"); pmi && *pmi != id.rank) {
    env.fail(fmt::format("OMPI_COMM_WORLD_RANK={} and PMI_RANK={} disagree: unset the stale one", id.rank, *pmi));
  }
  id.world_size = env.integer("OMPI_COMM_WORLD_SIZE");
  id.local_rank = env.integer("OMPI_COMM_WORLD_LOCAL_RANK");
  id.local_world_size = env.integer("OMPI_COMM_WORLD_LOCAL_SIZE");
  check_consistent(env, id, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "OMPI_COMM_WORLD_LOCAL_SIZE");
  id.node_rank = id.rank / id.local_world_size;  // mpirun's default by-slot mapping fills nodes in order
  read_rendezvous(env, id, "mpirun -x MASTER_ADDR=<host> -x MASTER_PORT=<port>");
  return id;
}

std::optional<RankIdentity> read_pmi(const LauncherEnv& env) {
  // Slurm's own PMI plugins set PMI_RANK for srun tasks without MPICH's local-rank variables;
  // Slurm's variables describe such a task completely, so the Slurm row claims it.
  if (!env.has("MPI_LOCALRANKID") && env.has("SLURM_PROCID") && env.has("SLURM_STEP_ID")) {
    return std::nullopt;
  }
  RankIdentity id;
  id.launcher = "pmi";
  id.rank = env.integer("PMI_RANK");
  id.world_size = env.integer("PMI_SIZE");
  id.local_rank = env.integer("MPI_LOCALRANKID");
  id.local_world_size = env.integer("MPI_LOCALNRANKS");
  check_consistent(env, id, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
  id.node_rank = id.rank / id.local_world_size;
  read_rendezvous(env, id, "mpiexec -genv MASTER_ADDR <host> -genv MASTER_PORT <port>");
  return id;
}

int slurm_local_world_size(const LauncherEnv& env, int node_rank) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (const auto text = env.text(name)) {
      const auto counts = expand_tasks_per_node(*text);
      if (!counts)
        env.fail(fmt::format("{}=\"{}\": {}", name, *text, counts.error().message));
      if (static_cast<size_t>(node_rank) >= counts->size()) {
        env.fail(fmt::format("{}=\"{}\" lists {} nodes but SLURM_NODEID={}", name, *text, counts->size(), node_rank));
      }
      return (*counts)[static_cast<size_t>(node_rank)];
    }
  }
  if (const auto per_node = env.optional_integer("SLURM_NTASKS_PER_NODE")) {
    return *per_node;
  }
  env.fail(
      "none of SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE is set: cannot tell "
      "how many tasks run on this node");
}

std::string slurm_master_addr(const LauncherEnv& env) {
  if (const auto addr = env.text("MASTER_ADDR")) {
    return *addr;
  }
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (const auto list = env.text(name)) {
      const auto host = first_host(*list);
      if (!host)
        env.fail(fmt::format("{}=\"{}\": {}", name, *list, host.error().message));
      return *host;
    }
  }
  env.fail(
      "neither MASTER_ADDR nor SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set: cannot tell where rank 0 "
      "runs");
}

std::optional<RankIdentity> read_slurm(const LauncherEnv& env) {
  // An sbatch script itself has SLURM_PROCID=0 and the job's SLURM_NTASKS but is not a task of
  // a step: there expctl launches its ranks itself.
  if (!env.has("SLURM_STEP_ID") && !env.has("SLURM_STEPID")) {
    return std::nullopt;
  }
  RankIdentity id;
  id.launcher = "slurm";
  id.rank = env.integer("SLURM_PROCID");
  // SLURM_NPROCS is the older spelling of SLURM_NTASKS.
  id.world_size = env.integer(env.has("SLURM_NTASKS") || !env.has("SLURM_NPROCS") ? "SLURM_NTASKS" : "SLURM_NPROCS");
  id.local_rank = env.integer("SLURM_LOCALID");
  id.node_rank = env.integer("SLURM_NODEID");
  id.local_world_size = slurm_local_world_size(env, id.node_rank);
  check_consistent(env, id, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_TASKS_PER_NODE");
  id.master_addr = slurm_master_addr(env);
  if (const auto port = env.optional_integer("MASTER_PORT")) {
    id.master_port = read_port(env, *port);
  }
  return id;
}

using Reader = std::optional<RankIdentity> (*)(const LauncherEnv&);
// Same order as k_launchers.
constexpr Reader k_readers[] = {read_torchrun, read_pytorchjob, read_trainer, read_open_mpi, read_pmi, read_slurm};
static_assert(std::size(k_readers) == std::size(k_launchers), "one reader per launcher row");

}  // namespace

std::span<const LauncherInfo> launchers() {
  return k_launchers;
}

std::optional<RankIdentity> detect_launcher(const EnvMap& env) {
  for (size_t i = 0; i < std::size(k_launchers); ++i) {
    if (env.count(std::string(k_launchers[i].marker)) == 0) {
      continue;
    }
    if (auto identity = k_readers[i](LauncherEnv(env, k_launchers[i]))) {
      return identity;
    }
  }
  return std::nullopt;
}

}  // namespace expctl::launch
