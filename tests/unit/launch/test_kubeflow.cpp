// Kubeflow's launch contracts: a PyTorchJob pod (Training Operator v1) and a TrainJob node
// (Trainer v2) are read as one rank each; a pod of several ranks is refused with the torchrun
// command that runs them. No cluster needed: the variables are what the operators set.

#include <catch2/catch.hpp>

#include "expctl/launch/launch_error.hpp"
#include "expctl/launch/rank_identity.hpp"

using namespace expctl::launch;

namespace {

// Pod 2 (worker 1) of a PyTorchJob with a master and 3 workers, nprocPerNode 1.
EnvMap pytorchjob_pod() {
  return {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
          {"MASTER_ADDR", "mnist-master-0"},
          {"MASTER_PORT", "23456"},
          {"WORLD_SIZE", "4"},
          {"RANK", "2"},
          {"PET_NNODES", "4"},
          {"PET_NODE_RANK", "2"},
          {"PET_NPROC_PER_NODE", "1"},
          {"PYTHONUNBUFFERED", "1"}};
}

// Node 1 of a 3-node TrainJob with numProcPerNode 1.
EnvMap trainer_node() {
  return {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
          {"PET_NNODES", "3"},
          {"PET_NPROC_PER_NODE", "1"},
          {"PET_NODE_RANK", "1"},
          {"PET_MASTER_ADDR", "mnist-node-0-0.mnist"},
          {"PET_MASTER_PORT", "29400"}};
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

TEST_CASE("kubeflow: a PyTorchJob pod is one rank: RANK of WORLD_SIZE, rank 0's pod hosts the store") {
  const auto id = detect_launcher(pytorchjob_pod());
  REQUIRE(id);
  CHECK(*id == RankIdentity{2, 4, 0, 1, 2, "mnist-master-0", 23456, "kubeflow-pytorchjob"});
  CHECK_FALSE(id->agent_store);
}

TEST_CASE("kubeflow: the PyTorchJob master pod is rank 0, also without the PET_ variables of older operators") {
  EnvMap env = pytorchjob_pod();
  env["RANK"] = "0";
  env.erase("PET_NNODES");
  env.erase("PET_NODE_RANK");
  env.erase("PET_NPROC_PER_NODE");
  const auto id = detect_launcher(env);
  REQUIRE(id);
  CHECK(id->rank == 0);
  CHECK(id->world_size == 4);
  CHECK(id->local_world_size == 1);
  CHECK(id->launcher == "kubeflow-pytorchjob");
}

TEST_CASE("kubeflow: torchrun inside a pod, and expctl's own ranks in a pod, stay torchrun and expctl") {
  EnvMap env = pytorchjob_pod();
  env["LOCAL_RANK"] = "1";
  env["LOCAL_WORLD_SIZE"] = "2";
  env["GROUP_RANK"] = "1";
  env["RANK"] = "3";
  CHECK(detect_launcher(env)->launcher == "torchrun");
  env["EXPCTL_CONTROL_FD"] = "3";
  CHECK(detect_launcher(env)->launcher == "expctl");
  EnvMap trainer_rank = trainer_node();
  for (const auto& [name, value] : EnvMap{{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "0"},
                                          {"LOCAL_WORLD_SIZE", "1"}, {"GROUP_RANK", "1"}, {"MASTER_ADDR", "n0"},
                                          {"MASTER_PORT", "29400"}}) {
    trainer_rank[name] = value;
  }
  CHECK(detect_launcher(trainer_rank)->launcher == "torchrun");
}

TEST_CASE("kubeflow: RANK without LOCAL_RANK outside Kubernetes is still a broken torchrun environment") {
  EnvMap env = pytorchjob_pod();
  env.erase("KUBERNETES_SERVICE_HOST");
  CHECK_THAT(error_of(env), Catch::StartsWith("torchrun: RANK is set but LOCAL_RANK is not"));
}

TEST_CASE("kubeflow: PyTorchJob errors name the variable") {
  EnvMap env = pytorchjob_pod();
  env["PET_NPROC_PER_NODE"] = "4";
  CHECK(error_of(env) ==
        "kubeflow-pytorchjob: PET_NPROC_PER_NODE=\"4\": this pod is one node of several ranks, and expctl runs one "
        "rank per pod here; set the job's processes per node to 1, or make torchrun the container's command: torchrun "
        "--nnodes=$PET_NNODES --nproc-per-node=$PET_NPROC_PER_NODE --node-rank=$PET_NODE_RANK "
        "--master-addr=$MASTER_ADDR --master-port=$MASTER_PORT --no-python expctl run SPEC");
  env = pytorchjob_pod();
  env["PET_NNODES"] = "3";
  CHECK(error_of(env) == "kubeflow-pytorchjob: PET_NNODES=3 and WORLD_SIZE=4 disagree: with one rank per pod they are "
                         "the number of pods");
  env = pytorchjob_pod();
  env.erase("MASTER_PORT");
  CHECK_THAT(error_of(env), Catch::StartsWith("kubeflow-pytorchjob: RANK is set but MASTER_PORT is not"));
  env = pytorchjob_pod();
  env["RANK"] = "4";
  CHECK(error_of(env) == "kubeflow-pytorchjob: RANK=4 is not below WORLD_SIZE=4");
}

TEST_CASE("kubeflow: a Trainer v2 node of one process is rank PET_NODE_RANK of PET_NNODES") {
  const auto id = detect_launcher(trainer_node());
  REQUIRE(id);
  CHECK(*id == RankIdentity{1, 3, 0, 1, 1, "mnist-node-0-0.mnist", 29400, "kubeflow-trainer"});
}

TEST_CASE("kubeflow: Trainer v2 errors name the variable") {
  EnvMap env = trainer_node();
  env["PET_NPROC_PER_NODE"] = "auto";
  CHECK_THAT(error_of(env), Catch::StartsWith("kubeflow-trainer: PET_NPROC_PER_NODE=\"auto\": this pod is one node of "
                                              "several ranks") &&
                                Catch::Contains("--master-addr=$PET_MASTER_ADDR --master-port=$PET_MASTER_PORT"));
  env = trainer_node();
  env.erase("PET_MASTER_ADDR");
  CHECK_THAT(error_of(env), Catch::StartsWith("kubeflow-trainer: PET_NODE_RANK is set but PET_MASTER_ADDR is not"));
  env = trainer_node();
  env["PET_NODE_RANK"] = "3";
  CHECK(error_of(env) == "kubeflow-trainer: PET_NODE_RANK=3 is not below PET_NNODES=3");
  env = trainer_node();
  env["PET_NNODES"] = "1:4";
  CHECK(error_of(env) == "kubeflow-trainer: PET_NNODES=\"1:4\" is not a non-negative integer");
}
