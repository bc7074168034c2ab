#include <catch2/catch.hpp>

#include "expctl/env/env_vars.hpp"
#include "expctl/env/fingerprint.hpp"

using namespace expctl::env;

TEST_CASE("env vars: secret-looking names are recognised in any case") {
  for (const char* name : {"NCCL_API_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "db_password", "MY_CREDENTIALS",
                           "HF_AUTH", "SLURM_JOB_KEYFILE"}) {
    CAPTURE(name);
    CHECK(is_secret_name(name));
  }
  for (const char* name : {"OMP_NUM_THREADS", "NCCL_DEBUG", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"}) {
    CAPTURE(name);
    CHECK_FALSE(is_secret_name(name));
  }
}

TEST_CASE("env vars: the allow-list separates computation from launcher variables") {
  CHECK(allow_listed("OMP_NUM_THREADS") == EnvVarKind::computation);
  CHECK(allow_listed("NCCL_IB_DISABLE") == EnvVarKind::computation);
  CHECK(allow_listed("CUBLAS_WORKSPACE_CONFIG") == EnvVarKind::computation);
  CHECK(allow_listed("MASTER_ADDR") == EnvVarKind::launch);
  CHECK(allow_listed("SLURM_JOB_ID") == EnvVarKind::launch);
  CHECK(allow_listed("RANK") == EnvVarKind::launch);
  CHECK_FALSE(allow_listed("HOME").has_value());
  CHECK_FALSE(allow_listed("RANKING").has_value());
  CHECK_FALSE(allow_listed("PATH").has_value());
}

TEST_CASE("env vars: allow-listed secrets are masked, others dropped, extra names added") {
  const std::map<std::string, std::string> environment{{"NCCL_API_TOKEN", "supersecret"},
                                                       {"OMP_NUM_THREADS", "4"},
                                                       {"SLURM_JOB_ID", "77"},
                                                       {"AWS_SECRET_ACCESS_KEY", "hidden"},
                                                       {"MY_SETTING", "on"},
                                                       {"MY_AUTH_HEADER", "Bearer x"},
                                                       {"HOME", "/root"}};
  const RecordedEnvVars recorded = record_env_vars(environment, {"MY_SETTING", "MY_AUTH_HEADER"});
  CHECK(recorded.computation ==
        std::map<std::string, std::string>{
            {"MY_AUTH_HEADER", "***"}, {"MY_SETTING", "on"}, {"NCCL_API_TOKEN", "***"}, {"OMP_NUM_THREADS", "4"}});
  CHECK(recorded.launch == std::map<std::string, std::string>{{"SLURM_JOB_ID", "77"}});
}

TEST_CASE("env vars: a secret never reaches the fingerprint's JSON, text or canonical form") {
  FingerprintOptions options;
  options.environment = {
      {"NCCL_API_TOKEN", "supersecret"}, {"TORCH_SECRET_SAUCE", "supersecret"}, {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}};
  options.load_gpu_libraries = false;
  const Fingerprint fingerprint = collect_fingerprint(options);
  CHECK(fingerprint.to_json().dump().find("supersecret") == std::string::npos);
  CHECK(fingerprint.canonical().find("supersecret") == std::string::npos);
  CHECK(fingerprint.text("env.vars").find("supersecret") == std::string::npos);
  CHECK(fingerprint.text("env.vars") == "CUBLAS_WORKSPACE_CONFIG=:4096:8, NCCL_API_TOKEN=***, TORCH_SECRET_SAUCE=***");
  CHECK(fingerprint.text("determinism.cublas_workspace_config") == ":4096:8");
}
