#include <cstdlib>
#include <set>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/env/fields.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/env/probes.hpp"
#include "expctl/util/error.hpp"

using namespace expctl::env;

namespace {

std::filesystem::path data_dir() {
  return expctl::test::source_dir() / "tests/data/env";
}

std::string read_data(const std::string& name) {
  auto text = probes::read_file_text(data_dir() / name);
  REQUIRE(text.has_value());
  return *text;
}

FingerprintOptions quiet_options() {
  FingerprintOptions options;
  options.load_gpu_libraries = false;
  options.environment = std::map<std::string, std::string>{{"OMP_NUM_THREADS", "4"}};
  return options;
}

FingerprintOptions fake_root_options() {
  FingerprintOptions options = quiet_options();
  options.root = data_dir() / "fake_root";
  options.environment = std::map<std::string, std::string>{{"EXPCTL_IMAGE_DIGEST", "sha256:" + std::string(64, 'a')}};
  options.torch_fields = [] {
    return std::map<std::string, std::string>{{"version", "1.13.0"},
                                              {"show_config", read_data("show_config_debian_1.13.txt")},
                                              {"library", "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"}};
  };
  return options;
}

}  // namespace

TEST_CASE("fingerprint: the field table has unique names in known groups") {
  std::set<std::string_view> names;
  for (const FieldSpec& field : fields()) {
    CAPTURE(field.name);
    CHECK(names.insert(field.name).second);
    CHECK(std::find(groups().begin(), groups().end(), group_of(field.name)) != groups().end());
    CHECK_FALSE(field.doc.empty());
  }
  CHECK_FALSE(find_field("host.hostname")->hashed);
  CHECK(find_field("host.os_id")->hashed);
}

TEST_CASE("fingerprint: every field is present and has its type") {
  const Fingerprint fingerprint = collect_fingerprint(quiet_options());
  std::size_t optional_fields = 0;
  for (const FieldSpec& field : fields()) {
    CAPTURE(field.name);
    const nlohmann::json* value = fingerprint.find(field.name);
    if (group_of(field.name) == "program" || group_of(field.name) == "jit") {
      CHECK(value == nullptr);  // only for runs of a user's program, or of a TorchScript model
      ++optional_fields;
      continue;
    }
    REQUIRE(value != nullptr);
    CHECK(has_type(*value, field.type));
  }
  CHECK(fingerprint.values().size() == fields().size() - optional_fields);
}

TEST_CASE("fingerprint: a TorchScript model's interpreter switches are hashed, and absent for other runs") {
  const Fingerprint builtin = collect_fingerprint(quiet_options());
  CHECK(builtin.find("jit.executor") == nullptr);
  auto options = quiet_options();
  options.jit = JitSettings{.profiling_executor = true, .tensorexpr_fuser = true};
  const Fingerprint fused = collect_fingerprint(options);
  REQUIRE(fused.find("jit.executor") != nullptr);
  CHECK(*fused.find("jit.executor") == "profiling");
  CHECK(*fused.find("jit.tensorexpr_fuser") == true);
  CHECK(fused.hash() != builtin.hash());
  options.jit->tensorexpr_fuser = false;  // AMP's setting: another stack, another hash
  const Fingerprint unfused = collect_fingerprint(options);
  CHECK(*unfused.find("jit.tensorexpr_fuser") == false);
  CHECK(unfused.hash() != fused.hash());
  options.jit->profiling_executor = false;
  CHECK(*collect_fingerprint(options).find("jit.executor") == "legacy");
}

TEST_CASE("fingerprint: this machine's facts are plausible") {
  const Fingerprint fingerprint = collect_fingerprint(quiet_options());
  CHECK(fingerprint.text("host.os_id") != "none");
  CHECK(fingerprint.find("host.cpu_logical_cores")->get<int64_t>() >= 1);
  CHECK(fingerprint.find("host.cpu_physical_cores")->get<int64_t>() >= 1);
  CHECK(fingerprint.find("host.memory_total_gib")->get<int64_t>() >= 0);
  CHECK(fingerprint.text("software.compiler_id") == "gnu");
  CHECK(fingerprint.text("software.libtorch_version") == "none");  // no provider given
  CHECK(fingerprint.find("software.libraries")->contains("fmt"));
  CHECK(fingerprint.text("env.vars") == "OMP_NUM_THREADS=4");
}

TEST_CASE("fingerprint: the hash is the same when computed twice") {
  const Fingerprint first = collect_fingerprint(quiet_options());
  const Fingerprint second = collect_fingerprint(quiet_options());
  CHECK(first.hash() == second.hash());
  CHECK(first.hash().size() == 64);
  CHECK(first.canonical() == second.canonical());
}

TEST_CASE("fingerprint: hostname, GPU UUIDs and volatile fields do not enter the hash") {
  Fingerprint fingerprint = collect_fingerprint(quiet_options());
  const std::string before = fingerprint.hash();
  fingerprint.set("host.hostname", "node-4");
  fingerprint.set("host.uptime_s", int64_t{1});
  fingerprint.set("host.memory_available_mib", int64_t{2});
  fingerprint.set("gpu.uuids", std::vector<std::string>{"GPU-x"});
  fingerprint.set("env.launch_vars", nlohmann::json{{"SLURM_JOB_ID", "99"}});
  fingerprint.set("determinism.seed", "7");
  CHECK(fingerprint.hash() == before);
  CHECK(fingerprint.canonical().find("hostname") == std::string::npos);
  fingerprint.set("host.kernel", "0.0.1-other");
  CHECK(fingerprint.hash() != before);
}

TEST_CASE("fingerprint: to_json and from_json round-trip, hash included") {
  const Fingerprint fingerprint = collect_fingerprint(quiet_options());
  const nlohmann::json document = fingerprint.to_json();
  CHECK(document["hash"] == fingerprint.hash());
  CHECK(document["fingerprint_version"] == k_fingerprint_version);
  CHECK(document["fields"]["host"].contains("os_id"));
  const Fingerprint back = Fingerprint::from_json(document, "saved.json");
  CHECK(back.values() == fingerprint.values());
  CHECK(back.hash() == fingerprint.hash());
}

TEST_CASE("fingerprint: from_json names the file and the field when a value has the wrong type") {
  nlohmann::json document{{"fields", {{"host", {{"os_id", 12}}}}}};
  CHECK_THROWS_WITH(Fingerprint::from_json(document, "a.json"),
                    "a.json: field \"host.os_id\" should be a string, not number: was it written by expctl env "
                    "--format json?");
  CHECK_THROWS_WITH(Fingerprint::from_json(nlohmann::json{{"hash", "x"}}, "b.json"),
                    "b.json: not a fingerprint (no \"fields\" object): save one with expctl env --format json > FILE");
}

TEST_CASE("fingerprint: probes read a fake root: OS, CPU, memory, GPUs, container, dpkg") {
  const Fingerprint fingerprint = collect_fingerprint(fake_root_options());
  CHECK(fingerprint.text("host.os_id") == "rocky");
  CHECK(fingerprint.text("host.os_version") == "9.3");
  CHECK(fingerprint.text("host.os_name") == "Rocky Linux 9.3 (Blue Onyx)");
  CHECK(fingerprint.text("host.cpu_model") == "Intel(R) Xeon(R) Platinum 8480+");
  CHECK(*fingerprint.find("host.cpu_logical_cores") == 4);
  CHECK(*fingerprint.find("host.cpu_physical_cores") == 3);
  CHECK(fingerprint.text("host.isa_flags") ==
        "sse4_2, avx, avx2, fma, f16c, avx512f, avx512bw, avx512_bf16, "
        "amx_tile, amx_bf16, amx_int8");
  CHECK(*fingerprint.find("host.memory_total_gib") == 2016);
  CHECK(*fingerprint.find("host.memory_available_mib") == 1953125);
  CHECK(*fingerprint.find("host.uptime_s") == 86400);
  CHECK(*fingerprint.find("gpu.count") == 2);
  CHECK(fingerprint.text("gpu.models") == "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3");
  CHECK(fingerprint.text("gpu.uuids") ==
        "GPU-11111111-2222-3333-4444-555555555555, GPU-66666666-7777-8888-9999-000000000000");
  CHECK(fingerprint.text("gpu.driver_version") == "535.104.05");
  CHECK(fingerprint.text("gpu.source") == "procfs");
  CHECK(fingerprint.text("container.runtime") == "podman");
  CHECK(*fingerprint.find("container.detected") == true);
  CHECK(fingerprint.text("container.image") == "registry.example.org/expctl/rocky9-cuda:0.1");
  CHECK(fingerprint.text("container.image_digest") == "sha256:" + std::string(64, 'a'));
  CHECK(fingerprint.text("software.libtorch_version") == "1.13.1");
  CHECK(fingerprint.text("software.libtorch_header_version") == "1.13.0");
}

TEST_CASE("fingerprint: a Debian CPU LibTorch uses no CUDA stack") {
  const Fingerprint fingerprint = collect_fingerprint(fake_root_options());
  CHECK(fingerprint.text("software.libtorch_cuda") == "none");
  CHECK(fingerprint.text("software.libtorch_blas") == "generic");
  CHECK(fingerprint.text("software.libtorch_mkldnn") == "2.6.3");
  CHECK(fingerprint.text("software.libtorch_openmp") == "201511 (a.k.a. OpenMP 4.5)");
  CHECK(fingerprint.text("software.libtorch_cpu_capability") == "AVX2");
  CHECK(fingerprint.text("software.libtorch_compiler") == "GCC 12.2");
  CHECK(fingerprint.text("software.libtorch_nccl") == "OFF");
  CHECK(fingerprint.text("gpu.cuda_runtime") == "none");
  CHECK(fingerprint.text("gpu.cudnn") == "none");
  CHECK(fingerprint.text("gpu.nccl") == "none");
}

TEST_CASE("fingerprint: a CUDA LibTorch's runtime and cuDNN come from its build configuration") {
  FingerprintOptions options = fake_root_options();
  options.torch_fields = [] {
    return std::map<std::string, std::string>{{"version", "2.1.0"},
                                              {"show_config", read_data("show_config_cu118_2.1.txt")}};
  };
  const Fingerprint fingerprint = collect_fingerprint(options);
  CHECK(fingerprint.text("software.libtorch_version") == "2.1.0");
  CHECK(fingerprint.text("software.libtorch_library") == "none");
  CHECK(fingerprint.text("software.libtorch_cuda") == "11.8");
  CHECK(fingerprint.text("software.libtorch_cudnn") == "8.7.0");
  CHECK(fingerprint.text("software.libtorch_blas") == "mkl");
  CHECK(fingerprint.text("software.libtorch_mkldnn") == "3.1.1");
  CHECK(fingerprint.text("software.libtorch_nccl") == "ON");
  CHECK(fingerprint.text("software.libtorch_cpu_capability") == "AVX512");
  CHECK(fingerprint.text("gpu.cuda_runtime") == "11.8");
  CHECK(fingerprint.text("gpu.cudnn") == "8.7.0");
  CHECK(fingerprint.text("gpu.nccl") == "unknown");  // NCCL is not loaded when libraries are off
}

TEST_CASE("fingerprint: a machine without GPU, container or git records none, not an error") {
  expctl::test::TempDir empty;
  FingerprintOptions options = quiet_options();
  options.root = empty.path();
  options.code_directory = empty.path();
  const Fingerprint fingerprint = collect_fingerprint(options);
  CHECK(*fingerprint.find("gpu.count") == 0);
  CHECK(fingerprint.text("gpu.driver_version") == "none");
  CHECK(fingerprint.text("gpu.source") == "none");
  CHECK(fingerprint.text("container.runtime") == "none");
  CHECK(*fingerprint.find("container.detected") == false);
  CHECK(fingerprint.text("host.os_id") == "none");
  CHECK(fingerprint.text("code.git_commit") == "none");
}

TEST_CASE("fingerprint: NVML's devices, driver and CUDA driver (a stand-in library) are the GPU facts") {
  ::setenv("EXPCTL_NVML_LIBRARY", EXPCTL_TEST_FAKE_NVML, 1);
  expctl::test::TempDir empty;
  FingerprintOptions options = quiet_options();
  options.root = empty.path();
  options.code_directory = empty.path();
  options.load_gpu_libraries = true;
  const Fingerprint fingerprint = collect_fingerprint(options);
  ::unsetenv("EXPCTL_NVML_LIBRARY");
  CHECK(fingerprint.text("gpu.source") == "nvml");
  CHECK(*fingerprint.find("gpu.count") == 1);
  CHECK(fingerprint.text("gpu.models") == "Fake GPU 80GB");
  CHECK(fingerprint.text("gpu.uuids") == "GPU-00000000-fake-0000-0000-000000000000");
  CHECK(fingerprint.text("gpu.memory_mib") == "81920");
  CHECK(fingerprint.text("gpu.driver_version") == "550.54.15");
  CHECK(fingerprint.text("gpu.cuda_driver") == "12.4");
}

TEST_CASE("fingerprint: docs/env.md lists every field and every profile key") {
  const std::string doc = probes::read_file_text(expctl::test::source_dir() / "docs/env.md").value_or("");
  REQUIRE_FALSE(doc.empty());
  for (const FieldSpec& field : fields()) {
    CAPTURE(field.name);
    CHECK(doc.find("| `" + std::string(field.name) + "` | " + std::string(type_name(field.type)) + " | " +
                   (field.hashed ? "yes" : "no") + " |") != std::string::npos);
  }
}

TEST_CASE("fingerprint: the interpreter of a program is found from argv[0] or its #! line") {
  CHECK(probes::python_of("/usr/bin/python3", "") == std::filesystem::path("/usr/bin/python3"));
  CHECK(probes::python_of("/work/train.py", "#!/usr/bin/env python3") == std::filesystem::path("python3"));
  CHECK(probes::python_of("/work/train.py", "#!/opt/py/bin/python3.11 -u") ==
        std::filesystem::path("/opt/py/bin/python3.11"));
  CHECK_FALSE(probes::python_of("/work/train.sh", "#!/bin/sh").has_value());
  CHECK_FALSE(probes::python_of("/usr/bin/mpirun", "\x7f" "ELF").has_value());
}

TEST_CASE("fingerprint: a Python program's stack is probed through its interpreter, then cached") {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    FAIL("/usr/bin/python3 is missing: apt-get install python3 (scripts/install-deps.sh installs it)");
  }
  const expctl::test::TempDir cache;
  ::setenv("EXPCTL_CACHE_DIR", cache.path().c_str(), 1);
  FingerprintOptions options = quiet_options();
  options.program_command = {"python3", "train.py"};
  options.program_path = "/usr/bin";
  options.program_workdir = cache.path();
  const Fingerprint first = collect_fingerprint(options);
  CHECK(first.text("program.executable") == "/usr/bin/python3");
  CHECK(first.text("program.python_version").starts_with("3."));
  CHECK(first.text("program.interpreter") != "none");
  // Debian's python3-torch answers as the interpreter imports it.
  CHECK(first.text("program.torch_version") != "");
  REQUIRE(std::filesystem::exists(cache.path() / "program-stack"));
  CHECK(std::distance(std::filesystem::directory_iterator(cache.path() / "program-stack"),
                      std::filesystem::directory_iterator()) == 1);
  const Fingerprint second = collect_fingerprint(options);
  CHECK(second.hash() == first.hash());
  // Not the stack of a run without a program: that fingerprint's hash does not see the group.
  CHECK(collect_fingerprint(quiet_options()).hash() != first.hash());
  ::unsetenv("EXPCTL_CACHE_DIR");
}
