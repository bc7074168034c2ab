#include "expctl/env/fields.hpp"

#include <algorithm>

namespace expctl::env {

namespace {

using enum FieldType;

// Hashed fields describe the stack a result depends on. Left out of the hash: what differs
// between identical nodes or from one minute to the next (hostname, GPU UUIDs, uptime, free
// memory), the launcher's per-job variables, the seed (already in the spec hash) and the
// untracked-file manifest (run outputs inside the experiment directory would change it on
// every run).
constexpr FieldSpec k_fields[] = {
    {"host.os_id", string, true, "ID= of /etc/os-release (debian, rocky, centos...)"},
    {"host.os_version", string, true, "VERSION_ID= of /etc/os-release"},
    {"host.os_name", string, false, "PRETTY_NAME= of /etc/os-release"},
    {"host.kernel", string, true, "kernel release (uname -r)"},
    {"host.arch", string, true, "machine architecture (uname -m)"},
    {"host.cpu_model", string, true, "CPU model name (/proc/cpuinfo)"},
    {"host.cpu_physical_cores", integer, true, "physical cores (distinct socket/core pairs)"},
    {"host.cpu_logical_cores", integer, true, "logical CPUs (hardware threads)"},
    {"host.isa_flags", string_list, true, "kernel-relevant ISA extensions the CPU has (avx2, avx512f, amx...)"},
    {"host.memory_total_gib", integer, true, "total memory, rounded to GiB"},
    {"host.libc", string, true, "C library and version"},
    {"host.hostname", string, false, "host name (recorded, never hashed)"},
    {"host.uptime_s", integer, false, "seconds since boot (volatile)"},
    {"host.memory_available_mib", integer, false, "available memory in MiB (volatile)"},
    {"gpu.count", integer, true, "number of NVIDIA GPUs visible (0 without a driver)"},
    {"gpu.models", string_list, true, "GPU model per device"},
    {"gpu.memory_mib", integer_list, true, "GPU memory per device in MiB"},
    {"gpu.uuids", string_list, false, "GPU UUID per device (differs between identical nodes)"},
    {"gpu.driver_version", string, true, "NVIDIA driver version, or none"},
    {"gpu.cuda_driver", string, true, "highest CUDA version the driver supports, or none"},
    {"gpu.cuda_runtime", string, true, "CUDA runtime the process uses (LibTorch's; none for a CPU LibTorch), or none"},
    {"gpu.cudnn", string, true, "cuDNN version the process loads (none for a CPU LibTorch)"},
    {"gpu.nccl", string, true, "NCCL version the process loads (none when LibTorch has no NCCL)"},
    {"gpu.source", string, false, "where the GPU facts came from: nvml, procfs or none"},
    {"software.libtorch_version", string, true, "LibTorch version (the package's when a package owns it)"},
    {"software.libtorch_header_version", string, true, "TORCH_VERSION of the headers expctl was built with"},
    {"software.libtorch_library", string, false, "path of the loaded LibTorch library"},
    {"software.libtorch_cuda", string, true, "CUDA version LibTorch was built with, or none"},
    {"software.libtorch_cudnn", string, true, "cuDNN version LibTorch was built with, or none"},
    {"software.libtorch_blas", string, true, "BLAS LibTorch uses (BLAS_INFO)"},
    {"software.libtorch_lapack", string, true, "LAPACK LibTorch uses (LAPACK_INFO)"},
    {"software.libtorch_openmp", string, true, "OpenMP LibTorch was built with, or none"},
    {"software.libtorch_mkldnn", string, true, "oneDNN (MKL-DNN) version, or none"},
    {"software.libtorch_cpu_capability", string, true, "CPU kernels LibTorch dispatches to (AVX2, AVX512...)"},
    {"software.libtorch_compiler", string, true, "compiler that built LibTorch"},
    {"software.libtorch_build_type", string, true, "LibTorch's CMAKE_BUILD_TYPE"},
    {"software.libtorch_nccl", string, true, "whether LibTorch was built with NCCL (ON/OFF)"},
    {"software.libtorch_math_libraries", string_map, true,
     "BLAS, LAPACK, oneDNN, SLEEF and OpenMP files LibTorch loads (links resolved) with their packages"},
    {"software.compiler_id", string, true, "compiler that built expctl: gnu or clang"},
    {"software.compiler_version", string, true, "its version"},
    {"software.cxx_stdlib", string, true, "C++ standard library expctl was built with"},
    {"software.expctl_version", string, true, "expctl version"},
    {"software.expctl_commit", string, true, "expctl git commit (-dirty when built from a modified tree)"},
    {"software.libraries", string_map, true, "versions of the other libraries expctl was built with"},
    {"code.directory", string, false, "experiment directory whose git state is recorded"},
    {"code.git_commit", string, true, "commit checked out, or none outside a git checkout"},
    {"code.dirty", boolean, true, "tracked files differ from the commit"},
    {"code.diff_sha256", string, true, "SHA-256 of `git diff HEAD --binary`, or none when clean"},
    {"code.untracked", file_list, false, "untracked, not ignored files with their SHA-256"},
    {"container.detected", boolean, true, "the process runs in a container"},
    {"container.runtime", string, true, "docker, podman, kubernetes, containerd, lxc, other or none"},
    {"container.image", string, false, "image name (EXPCTL_IMAGE or the runtime's), or none"},
    {"container.image_digest", string, true, "image digest (EXPCTL_IMAGE_DIGEST), or none"},
    {"determinism.seed", string, false, "random seed of the run, or none (it is part of the spec hash)"},
    {"determinism.deterministic_algorithms", boolean, true, "torch deterministic algorithms requested"},
    {"determinism.cublas_workspace_config", string, true, "CUBLAS_WORKSPACE_CONFIG, or none"},
    {"determinism.cudnn_deterministic", boolean, true, "cuDNN deterministic mode"},
    {"determinism.cudnn_benchmark", boolean, true, "cuDNN autotuner (benchmark mode)"},
    // Only for runs of a TorchScript model (model.arch torchscript): other runs have no jit group.
    {"jit.executor", string, true, "TorchScript executor the trainer sets: profiling or legacy"},
    {"jit.tensorexpr_fuser", boolean, true, "NNC tensor-expression fusion (GPU only; off under AMP)"},
    {"env.vars", string_map, true, "allow-listed variables that shape the computation (secrets masked)"},
    {"env.launch_vars", string_map, false, "allow-listed per-job launcher variables (SLURM_*, MASTER_*, RANK...)"},
    // Only for runs of a user's program (spec program.command, docs/program.md): fingerprints of
    // other runs have none of them, so their hashes are what they were before this group existed.
    {"program.executable", string, false, "the program the command runs (argv[0] resolved in PATH)"},
    {"program.interpreter", string, false, "the Python interpreter that runs it (sys.executable), or none"},
    {"program.python_version", string, true, "that interpreter's version, or none"},
    {"program.python_packages", string_list, true, "every distribution installed for it, name==version"},
    {"program.torch_version", string, true, "torch's version as that interpreter imports it, or none"},
    {"program.torch_cuda", string, true, "the CUDA version that torch was built with, or none"},
    {"program.torch_cudnn", string, true, "the cuDNN version that torch loads, or none"},
    {"program.torch_nccl", string, true, "the NCCL version that torch has, or none"},
};

constexpr std::string_view k_groups[] = {"host", "gpu",         "software", "code",
                                         "container", "determinism", "jit", "env", "program"};

}  // namespace

std::span<const FieldSpec> fields() {
  return k_fields;
}

const FieldSpec* find_field(std::string_view name) {
  const auto* it = std::find_if(std::begin(k_fields), std::end(k_fields),
                                [name](const FieldSpec& field) { return field.name == name; });
  return it == std::end(k_fields) ? nullptr : it;
}

std::string_view group_of(std::string_view field_name) {
  return field_name.substr(0, field_name.find('.'));
}

std::string_view key_of(std::string_view field_name) {
  const size_t dot = field_name.find('.');
  return dot == std::string_view::npos ? field_name : field_name.substr(dot + 1);
}

std::span<const std::string_view> groups() {
  return k_groups;
}

std::string_view type_name(FieldType type) {
  switch (type) {
    case string:
      return "string";
    case integer:
      return "integer";
    case boolean:
      return "boolean";
    case string_list:
      return "string list";
    case integer_list:
      return "integer list";
    case string_map:
      return "string map";
    case file_list:
      return "file list";
  }
  return "unknown";
}

bool has_type(const nlohmann::json& value, FieldType type) {
  const auto all_of = [&value](auto predicate) {
    return value.is_array() && std::all_of(value.begin(), value.end(), predicate);
  };
  switch (type) {
    case string:
      return value.is_string();
    case integer:
      return value.is_number_integer();
    case boolean:
      return value.is_boolean();
    case string_list:
      return all_of([](const nlohmann::json& v) { return v.is_string(); });
    case integer_list:
      return all_of([](const nlohmann::json& v) { return v.is_number_integer(); });
    case string_map:
      return value.is_object() &&
             std::all_of(value.begin(), value.end(), [](const nlohmann::json& v) { return v.is_string(); });
    case file_list:
      return all_of([](const nlohmann::json& v) {
        return v.is_object() && v.size() == 2 && v.contains("path") && v["path"].is_string() && v.contains("sha256") &&
               v["sha256"].is_string();
      });
  }
  return false;
}

}  // namespace expctl::env
