#include <iterator>
#include <set>
#include <utility>

#include <catch2/catch.hpp>

#include "expctl/env/env_vars.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/env/probes.hpp"
#include "support/test_support.hpp"

using namespace expctl::env;

namespace {

// Names that carry a secret: every one must be masked.
constexpr const char* k_secret_names[] = {
    // The four, which the substring rule let through in clear.
    "NCCL_PASSWD", "TORCH_PASS", "GLOO_PWD", "MASTER_CREDS",
    // Well-known services.
    "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET", "OPENAI_APIKEY", "GITHUBTOKEN", "GITHUB_TOKEN", "DB_PRIVATE_KEY", "NCCL_API_TOKEN",
    // Every word of the table, in other spellings and positions.
    "db_password", "MY_CREDENTIALS", "HF_AUTH", "SLURM_JOB_KEYFILE", "KRB5_KEYTAB", "SSH_PRIVATE", "GPG_PASSPHRASE",
    "TORCH_PASSCODE", "MASTER_CRED", "PWD", "S3KEY", "NCCL_KEY2", "GLOO_KEYS", "OAUTH_CLIENT_ID",
    "HTTP_AUTHORIZATION", "API_BEARER", "ERLANG_COOKIE", "JAVA_KEYSTORE", "SECRET", "NCCL_SECRETS",
    "torch.passwd", "my-secret.value", "dbPassword", "openaiApiKey", "gitlabToken", "SSHPRIVATEKEY",
    "AWSACCESSKEY", "NCCL_AUTHKEY", "HF_TOKENIZERS_TOKEN", "KEY"};

// Names that carry facts worth recording: none may be masked.
constexpr const char* k_innocent_names[] = {
    "CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
    "KEYBOARD_LAYOUT", "PASSTHROUGH_MODE", "NCCL_IB_HCA", "NCCL_IB_PKEY", "NCCL_DEBUG", "NCCL_P2P_DISABLE",
    "NCCL_NET_GDR_LEVEL", "NCCL_KEEPALIVE", "GLOO_SOCKET_IFNAME", "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_CUDA_ALLOC_CONF", "TORCH_DISTRIBUTED_DEBUG", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "KMP_AFFINITY",
    "MKL_SERVICE_FORCE_INTEL", "LD_LIBRARY_PATH", "TOKENIZERS_PARALLELISM", "HF_TOKENIZER_PATH", "GIT_AUTHOR_NAME",
    "AWS_SIGNATURE_VERSION", "NCCL_BYPASS_CHECK", "COMPASS_HEADING", "MONKEY_PATCH", "HOTKEY", "OLDPWD",
    "SESSION_NAME", "SSL_CERT_FILE", "TORCH_PIN_MEMORY", "WORLD_SIZE", "RANK", "PMI_RANK", "keyboardLayout",
    "passthroughMode", "AUTHOR", "NCCL_PROTO", ""};

}  // namespace

TEST_CASE("env vars: every secret-looking name of the corpus is masked") {
  STATIC_REQUIRE(std::size(k_secret_names) + std::size(k_innocent_names) >= 40);
  for (const char* name : k_secret_names) {
    const std::vector<std::string> words = name_words(name);
    CAPTURE(name, words);
    CHECK(is_secret_name(name));
  }
}

TEST_CASE("env vars: no innocent name of the corpus is masked") {
  for (const char* name : k_innocent_names) {
    const std::vector<std::string> words = name_words(name);
    CAPTURE(name, words);
    CHECK_FALSE(is_secret_name(name));
  }
}

TEST_CASE("env vars: names split into words at separators, digits and lower-to-upper changes") {
  using Words = std::vector<std::string>;
  CHECK(name_words("AWS_SECRET_ACCESS_KEY") == Words{"AWS", "SECRET", "ACCESS", "KEY"});
  CHECK(name_words("openaiApiKey2") == Words{"OPENAI", "API", "KEY"});
  CHECK(name_words("my-key.file") == Words{"MY", "KEY", "FILE"});
  CHECK(name_words("KRB5_KEYTAB") == Words{"KRB", "KEYTAB"});
  CHECK(name_words("GITHUBTOKEN") == Words{"GITHUBTOKEN"});
  CHECK(name_words("__9_") == Words{});
}

TEST_CASE("env vars: the secret table has upper-case words, each once") {
  std::set<std::string_view> seen;
  for (const SecretMarker& marker : secret_markers()) {
    CAPTURE(marker.word);
    CHECK(name_words(marker.word) == std::vector<std::string>{std::string(marker.word)});
    CHECK(seen.insert(marker.word).second);
  }
}

TEST_CASE("env vars: docs/env.md lists exactly the secret table") {
  const std::string doc = probes::read_file_text(expctl::test::source_dir() / "docs/env.md").value_or("");
  REQUIRE_FALSE(doc.empty());
  const std::pair<SecretMatch, const char*> rows[] = {{SecretMatch::anywhere, "anywhere in a word"},
                                                      {SecretMatch::whole_word, "a whole word"},
                                                      {SecretMatch::innocent, "a whole word, never a secret"}};
  for (const auto& [match, label] : rows) {
    std::string row = std::string("| ") + label + " |";
    for (const SecretMarker& marker : secret_markers()) {
      row += marker.match == match ? " `" + std::string(marker.word) + "`" : "";
    }
    INFO("docs/env.md is out of date: its secret-marker table must carry this row, as in env_vars.cpp");
    CHECK_THAT(doc, Catch::Contains(row + " |\n"));
  }
}

TEST_CASE("env vars: the allow-list separates computation from launcher variables") {
  CHECK(allow_listed("OMP_NUM_THREADS") == EnvVarKind::computation);
  CHECK(allow_listed("NCCL_IB_DISABLE") == EnvVarKind::computation);
  CHECK(allow_listed("CUBLAS_WORKSPACE_CONFIG") == EnvVarKind::computation);
  // What picks the CPU kernels or the BLAS under LibTorch without changing a file.
  for (const char* name : {"ATEN_CPU_CAPABILITY", "FLEXIBLAS", "FLEXIBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                           "BLIS_NUM_THREADS", "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "LD_PRELOAD"}) {
    CHECK(allow_listed(name) == EnvVarKind::computation);
  }
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

TEST_CASE("env vars: a store URL's password is masked in a recorded value, the rest is kept") {
  CHECK(mask_url_password("postgresql://alice:s3cret@db.example:5432/expctl") ==
        "postgresql://alice:***@db.example:5432/expctl");
  CHECK(mask_url_password("postgres://alice@db/expctl") == "postgres://alice@db/expctl");
  CHECK(mask_url_password("a postgres://u:p@h/x and https://v:q@w/") == "a postgres://u:***@h/x and https://v:***@w/");
  CHECK(mask_url_password("http://host/path@x:y") == "http://host/path@x:y");
  const auto recorded = record_env_vars({{"OMP_STORE", "postgresql://u:hunter2@h/db"}}, {});
  CHECK(recorded.computation.at("OMP_STORE") == "postgresql://u:***@h/db");
}
