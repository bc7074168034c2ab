#include <catch2/catch.hpp>

#include "expctl/launch/launch_error.hpp"
#include "expctl/launch/rank_identity.hpp"

using namespace expctl::launch;

namespace {

EnvMap torchrun_env() {
  return {{"RANK", "5"},       {"WORLD_SIZE", "8"},         {"LOCAL_RANK", "1"},      {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}, {"PATH", "/usr/bin"}};
}

EnvMap slurm_env() {
  return {{"SLURM_PROCID", "3"},
          {"SLURM_NTASKS", "6"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "1"},
          {"SLURM_NNODES", "2"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_STEP_TASKS_PER_NODE", "3(x2)"},
          {"SLURM_STEP_NODELIST", "node[07-08]"},
          {"SLURM_JOB_NODELIST", "node[01-08]"}};
}

std::string error_of(const EnvMap& env) {
  try {
    detect_launcher(env);
  } catch (const LaunchInputError& error) {
    CHECK(error.exit_code() == expctl::util::ExitCode::usage);
    return error.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("launcher: no launcher variables means expctl starts its own ranks", "[launch][identity]") {
  CHECK_FALSE(detect_launcher({{"PATH", "/usr/bin"}, {"HOME", "/root"}}).has_value());
}

TEST_CASE("launcher: torchrun --no-python", "[launch][identity]") {
  const auto id = detect_launcher(torchrun_env());
  REQUIRE(id);
  CHECK(*id == RankIdentity{5, 8, 1, 4, 1, "10.0.0.1", 29400, "torchrun"});
}

TEST_CASE("launcher: expctl's own supervisor uses torchrun's variables plus the control fd", "[launch][identity]") {
  EnvMap env = torchrun_env();
  env["EXPCTL_CONTROL_FD"] = "3";
  CHECK(detect_launcher(env)->launcher == "expctl");
}

TEST_CASE("launcher: a launcher that hosts the store makes every rank a client of it", "[launch][identity]") {
  EnvMap env = torchrun_env();
  CHECK_FALSE(detect_launcher(env)->agent_store);  // bare torchrun env: rank 0 hosts
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";     // torchrun's static rendezvous, expctl's supervisor
  CHECK(detect_launcher(env)->agent_store);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  CHECK_FALSE(detect_launcher(env)->agent_store);
}

TEST_CASE("launcher: expctl's single-node ranks read their rendezvous file and other launchers' ranks never do", "[launch][identity]") {
  EnvMap env = torchrun_env();
  env["EXPCTL_RENDEZVOUS_FILE"] = "/tmp/expctl-rendezvous-abc123";
  CHECK(detect_launcher(env)->rendezvous_file.empty());  // torchrun: a stray variable is not trusted
  env["EXPCTL_CONTROL_FD"] = "3";
  CHECK(detect_launcher(env)->rendezvous_file == "/tmp/expctl-rendezvous-abc123");
}

TEST_CASE("launcher: torchrun errors name the variable", "[launch][identity]") {
  EnvMap env = torchrun_env();
  env.erase("LOCAL_WORLD_SIZE");
  CHECK(error_of(env) ==
        "torchrun: RANK is set but LOCAL_WORLD_SIZE is not (a torchrun rank needs RANK, WORLD_SIZE, LOCAL_RANK, "
        "LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT)");
  env = torchrun_env();
  env["RANK"] = "8";
  CHECK(error_of(env) == "torchrun: RANK=8 is not below WORLD_SIZE=8");
  env = torchrun_env();
  env["WORLD_SIZE"] = "eight";
  CHECK(error_of(env) == "torchrun: WORLD_SIZE=\"eight\" is not a non-negative integer");
  env = torchrun_env();
  env["MASTER_PORT"] = "0";
  CHECK(error_of(env) == "torchrun: MASTER_PORT=0 is not a TCP port");
}

TEST_CASE("launcher: Open MPI's mpirun", "[launch][identity]") {
  EnvMap env = {{"OMPI_COMM_WORLD_RANK", "5"},       {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"MASTER_ADDR", "hostA"},      {"MASTER_PORT", "12345"}};
  CHECK(*detect_launcher(env) == RankIdentity{5, 8, 1, 4, 1, "hostA", 12345, "mpirun"});

  env.erase("MASTER_ADDR");
  CHECK(error_of(env) ==
        "mpirun: MASTER_ADDR is not set: mpirun does not tell a rank where rank 0 runs; export the host of rank 0 "
        "to every rank (mpirun -x MASTER_ADDR=<host> -x MASTER_PORT=<port>)");

  env["OMPI_COMM_WORLD_SIZE"] = "4";  // the whole job on this node: loopback, default port
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env.erase("MASTER_PORT");
  CHECK(*detect_launcher(env) == RankIdentity{1, 4, 1, 4, 0, "127.0.0.1", k_default_master_port, "mpirun"});

  env["PMI_RANK"] = "2";
  CHECK(error_of(env) == "mpirun: OMPI_COMM_WORLD_RANK=1 and PMI_RANK=2 disagree: unset the stale one");
}

TEST_CASE("launcher: MPICH/Hydra's PMI variables", "[launch][identity]") {
  EnvMap env = {{"PMI_RANK", "2"},
                {"PMI_SIZE", "4"},
                {"MPI_LOCALRANKID", "0"},
                {"MPI_LOCALNRANKS", "2"},
                {"MASTER_ADDR", "hostA"}};
  CHECK(*detect_launcher(env) == RankIdentity{2, 4, 0, 2, 1, "hostA", k_default_master_port, "pmi"});
  env.erase("PMI_SIZE");
  CHECK(error_of(env) ==
        "pmi: PMI_RANK is set but PMI_SIZE is not (a pmi rank needs PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, "
        "MPI_LOCALNRANKS, MASTER_ADDR, MASTER_PORT)");
}

TEST_CASE("launcher: Slurm srun task, master from the step's first node", "[launch][identity]") {
  CHECK(*detect_launcher(slurm_env()) == RankIdentity{3, 6, 0, 3, 1, "node07", k_default_master_port, "slurm"});

  EnvMap env = slurm_env();
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  env["SLURM_NTASKS_PER_NODE"] = "3";
  env["MASTER_PORT"] = "23456";
  CHECK(*detect_launcher(env) == RankIdentity{3, 6, 0, 3, 1, "node01", 23456, "slurm"});

  env["MASTER_ADDR"] = "login-fast";
  CHECK(detect_launcher(env)->master_addr == "login-fast");
}

TEST_CASE("launcher: Slurm uneven tasks per node pick this node's count", "[launch][identity]") {
  EnvMap env = slurm_env();
  env["SLURM_STEP_TASKS_PER_NODE"] = "4,2";
  env["SLURM_LOCALID"] = "1";
  env["SLURM_PROCID"] = "5";
  CHECK(detect_launcher(env)->local_world_size == 2);
}

TEST_CASE("launcher: an sbatch script itself is not a Slurm task", "[launch][identity]") {
  EnvMap env = slurm_env();
  env.erase("SLURM_STEP_ID");
  CHECK_FALSE(detect_launcher(env).has_value());
}

TEST_CASE("launcher: Slurm errors name the variable", "[launch][identity]") {
  EnvMap env = slurm_env();
  env.erase("SLURM_LOCALID");
  CHECK(error_of(env) ==
        "slurm: SLURM_PROCID is set but SLURM_LOCALID is not (a slurm rank needs SLURM_PROCID, "
        "SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_TASKS_PER_NODE (or "
        "SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE), SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST), "
        "MASTER_ADDR, MASTER_PORT)");
  env = slurm_env();
  env["SLURM_STEP_NODELIST"] = "node[07-08";
  CHECK(error_of(env) == "slurm: SLURM_STEP_NODELIST=\"node[07-08\": unbalanced \"[\"");
  env = slurm_env();
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  CHECK(error_of(env) ==
        "slurm: none of SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE is "
        "set: cannot tell how many tasks run on this node");
  env = slurm_env();
  env["SLURM_STEP_TASKS_PER_NODE"] = "3";
  CHECK(error_of(env) == "slurm: SLURM_STEP_TASKS_PER_NODE=\"3\" lists 1 nodes but SLURM_NODEID=1");
}

TEST_CASE("launcher: explicit launchers take precedence over Slurm", "[launch][identity]") {
  EnvMap env = slurm_env();  // e.g. torchrun started by srun, one per node
  for (const auto& [name, value] : torchrun_env()) env[name] = value;
  CHECK(detect_launcher(env)->launcher == "torchrun");
  CHECK(detect_launcher(env)->rank == 5);
}

TEST_CASE("launcher: srun with Slurm's PMI plugin is read as Slurm", "[launch][identity]") {
  EnvMap env = slurm_env();
  env["PMI_RANK"] = "3";
  env["PMI_SIZE"] = "6";
  CHECK(detect_launcher(env)->launcher == "slurm");
}

TEST_CASE("launcher: the table lists launchers in precedence order", "[launch][identity]") {
  std::vector<std::string> names;
  for (const LauncherInfo& info : launchers()) names.emplace_back(info.name);
  CHECK(names == std::vector<std::string>{"torchrun", "kubeflow-pytorchjob", "kubeflow-trainer", "mpirun", "pmi",
                                          "slurm"});
}
