#pragma once
/// The probes that fill a Fingerprint, one per group, and the pure parsers they are built from
/// (exposed so tests can feed them known text). Each probe never throws for something that
/// is absent on this machine: it records "none", 0 or false instead.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/env/fingerprint.hpp"

namespace expctl::env::probes {

/// The whole content of a file (works for /proc files that report size 0); nullopt when unreadable.
std::optional<std::string> read_file_text(const std::filesystem::path& path);

/// `path` below `root` ("/proc/cpuinfo" under "/tmp/fake" is "/tmp/fake/proc/cpuinfo").
std::filesystem::path under_root(const std::filesystem::path& root, std::string_view path);

/// Text with every malformed UTF-8 sequence replaced by '?', so JSON output never fails.
std::string valid_utf8(std::string_view text);

// ---- host ----

/// KEY=value pairs of an os-release file, quotes removed.
std::map<std::string, std::string> parse_os_release(std::string_view text);

struct CpuInfo {
  std::string model = "unknown";
  int64_t physical_cores = 0;
  int64_t logical_cores = 0;
  std::vector<std::string> isa_flags;  ///< the ones that matter for kernels, in table order
};

/// Model, core counts and the interesting ISA flags of a /proc/cpuinfo text (x86 and ARM).
CpuInfo parse_cpuinfo(std::string_view text);

/// A "Key: <n> kB" value of /proc/meminfo in KiB; nullopt when the key is missing.
std::optional<int64_t> meminfo_kib(std::string_view text, std::string_view key);

void probe_host(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- a user's program ----

/// The interpreter a command runs: argv[0] when its name starts with "python", else the
/// interpreter of its "#!" line (through /usr/bin/env too) when that is a Python; nullopt otherwise.
std::optional<std::filesystem::path> python_of(const std::filesystem::path& executable, std::string_view shebang_line);

/// Fills the `program` group when options.program_command is set.
void probe_program(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- GPU ----

/// The driver version in /proc/driver/nvidia/version ("NVRM version: ... Kernel Module  535.104.05 ...").
std::optional<std::string> driver_version_from_procfs(std::string_view text);

/// "12.2" for CUDA's 12020 (cudaRuntimeGetVersion, nvmlSystemGetCudaDriverVersion).
std::string cuda_version_text(int code);

/// "8.9.7" for cuDNN 8's 8907, "9.1.0" for cuDNN 9's 90100.
std::string cudnn_version_text(int64_t code);

/// "2.18.3" for NCCL's 21803 (>= 2.9), "2.8.4" for the older 2804.
std::string nccl_version_text(int code);

void probe_gpu(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- software ----

/// Digests at::show_config() text into software.libtorch_* keys (without the prefix):
/// cuda, cudnn, blas, lapack, openmp, mkldnn, cpu_capability, compiler, build_type, nccl.
std::map<std::string, std::string> digest_torch_config(std::string_view show_config);

/// Upstream part of a Debian version: "1.13.1" for "1:1.13.1+dfsg-4".
std::string upstream_version(std::string_view debian_version);

/// The dpkg packages (named `package_prefix`*, as "name:arch" or "name") whose file lists under
/// `root` hold one of `paths`, by path.
std::map<std::string, std::string> dpkg_owners(const std::filesystem::path& root, const std::set<std::string>& paths,
                                               std::string_view package_prefix);

/// dpkg's status file under `root`, with a newline in front (so every stanza starts with "\n").
std::string read_dpkg_status(const std::filesystem::path& root);

/// The upstream version of the installed `package` ("libblas3:amd64" -> "3.11.0") in `status`
/// (read_dpkg_status); with an architecture, only its stanza counts.
std::optional<std::string> dpkg_version(std::string_view status, const std::string& package);

/// Version of the dpkg package that owns `file` under `root` (only packages named
/// `package_prefix`*), as its upstream version; nullopt when no package owns it.
std::optional<std::string> dpkg_owner_version(const std::filesystem::path& root, const std::filesystem::path& file,
                                              std::string_view package_prefix);

/// `path` as a process under `root` sees it with every symlink resolved (an absolute link target
/// stays under `root`); `path` itself after more than 40 links (a loop).
std::filesystem::path resolve_links(const std::filesystem::path& root, const std::filesystem::path& path);

/// software.libtorch_math_libraries out of train's "math_libraries" (a loaded path per line):
/// each file name ("libblas.so.3") -> the file its links lead to, with the dpkg package that owns
/// it ("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0 (libblas3 3.11.0)"; the path alone
/// when no package does).
std::map<std::string, std::string> math_libraries(const std::filesystem::path& root, std::string_view loaded);

void probe_software(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- code ----

void probe_code(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- container ----

void probe_container(Fingerprint& fingerprint, const FingerprintOptions& options);

// ---- determinism and environment variables ----

void probe_determinism(Fingerprint& fingerprint, const FingerprintOptions& options);
/// jit.*: a TorchScript model's interpreter switches (nothing for other runs).
void probe_jit(Fingerprint& fingerprint, const FingerprintOptions& options);

void probe_env_vars(Fingerprint& fingerprint, const FingerprintOptions& options);

/// The environment the options describe: options.environment or this process's.
std::map<std::string, std::string> effective_environment(const FingerprintOptions& options);

}  // namespace expctl::env::probes
