// GPU facts without a CUDA build: NVML, cuDNN, NCCL and the CUDA runtime are loaded with
// dlopen when present, and /proc/driver/nvidia is read when NVML is not. A machine without
// a GPU records count 0 and "none" everywhere; nothing here is an error.

#include <algorithm>
#include <array>
#include <memory>
#include <regex>

#include <dlfcn.h>

#include <fmt/format.h>

#include "expctl/env/probes.hpp"
#include "expctl/util/nvml.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::env::probes {

namespace {

// The version getters of the CUDA runtime, NCCL and cuDNN, declared here so that no CUDA header is needed.
using IntVersionGetter = int (*)(int*);  // cudaRuntimeGetVersion, ncclGetVersion
using SizeVersionGetter = size_t (*)();  // cudnnGetVersion

constexpr int64_t k_bytes_per_mib = 1024 * 1024;

// Sonames tried in order; the newest first so a machine with two majors reports the one a
// freshly built program would load.
constexpr const char* k_cudart_names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
constexpr const char* k_cudnn_names[] = {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"};
constexpr const char* k_nccl_names[] = {"libnccl.so.2", "libnccl.so"};

struct LibraryCloser {
  void operator()(void* handle) const { ::dlclose(handle); }
};
using Library = std::unique_ptr<void, LibraryCloser>;

template <size_t N>
Library open_first(const char* const (&names)[N]) {
  for (const char* name : names) {
    if (void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      return Library(handle);
    }
  }
  return nullptr;
}

template <typename Function>
Function symbol(const Library& library, const char* name) {
  return library ? reinterpret_cast<Function>(::dlsym(library.get(), name)) : nullptr;
}

struct GpuFacts {
  std::vector<std::string> models;
  std::vector<int64_t> memory_mib;
  std::vector<std::string> uuids;
  std::string driver_version = "none";
  std::string cuda_driver = "none";
  std::string source = "none";
};

bool read_nvml(GpuFacts& facts) {
  const auto nvml = util::Nvml::open();
  if (!nvml) {
    return false;
  }
  facts.driver_version = nvml->driver_version().value_or(facts.driver_version);
  if (const auto cuda_driver = nvml->cuda_driver_version()) {
    facts.cuda_driver = cuda_version_text(*cuda_driver);
  }
  for (unsigned int index = 0; index < nvml->device_count(); ++index) {
    facts.models.push_back(nvml->name(index));
    facts.uuids.push_back(nvml->uuid(index));
    facts.memory_mib.push_back(static_cast<int64_t>(nvml->memory_total(index)) / k_bytes_per_mib);
  }
  facts.source = "nvml";
  return true;
}

// /proc/driver/nvidia/gpus/<bus id>/information has "Model:" and "GPU UUID:" lines.
void read_procfs(const std::filesystem::path& root, GpuFacts& facts) {
  const auto version = read_file_text(under_root(root, "/proc/driver/nvidia/version"));
  if (!version) {
    return;
  }
  facts.driver_version = driver_version_from_procfs(*version).value_or("unknown");
  facts.source = "procfs";
  std::error_code error;
  std::vector<std::filesystem::path> devices;
  for (const auto& entry : std::filesystem::directory_iterator(under_root(root, "/proc/driver/nvidia/gpus"), error)) {
    devices.push_back(entry.path());
  }
  std::sort(devices.begin(), devices.end());
  for (const auto& device : devices) {
    const std::string information = read_file_text(device / "information").value_or("");
    std::string model = "unknown";
    std::string uuid = "unknown";
    for (const std::string& line : util::split(information, '\n')) {
      const size_t colon = line.find(':');
      const std::string_view key = util::trim(std::string_view(line).substr(0, colon));
      const std::string_view value =
          colon == std::string::npos ? "" : util::trim(std::string_view(line).substr(colon + 1));
      model = key == "Model" ? std::string(value) : model;
      uuid = key == "GPU UUID" ? std::string(value) : uuid;
    }
    facts.models.push_back(model);
    facts.uuids.push_back(uuid);
    facts.memory_mib.push_back(0);  // procfs doesn't say; NVML does
  }
}

template <size_t N>
std::string int_version(const char* const (&names)[N], const char* function, std::string (*text)(int)) {
  const Library library = open_first(names);
  int code = 0;
  const auto getter = symbol<IntVersionGetter>(library, function);
  return getter != nullptr && getter(&code) == 0 && code > 0 ? text(code) : "none";
}

std::string cudnn_version(const std::string& libtorch_cudnn) {
  const Library library = open_first(k_cudnn_names);
  const auto getter = symbol<SizeVersionGetter>(library, "cudnnGetVersion");
  return getter != nullptr ? cudnn_version_text(static_cast<int64_t>(getter())) : libtorch_cudnn;
}

// The CUDA stack the process uses. A CPU-only LibTorch uses none, even on a machine that has
// CUDA libraries installed; a CUDA LibTorch uses its own CUDA and the cuDNN and NCCL that load.
// Without LibTorch facts (a build without the train module) the installed libraries are reported.
void set_process_gpu_stack(Fingerprint& fingerprint, bool load) {
  const bool torch_known = fingerprint.text("software.libtorch_version") != "none";
  const std::string torch_cuda = fingerprint.text("software.libtorch_cuda");
  const std::string torch_cudnn = fingerprint.text("software.libtorch_cudnn");
  const bool torch_nccl = fingerprint.text("software.libtorch_nccl") == "ON";
  std::string runtime = "none";
  std::string cudnn = "none";
  std::string nccl = "none";
  if (!torch_known && load) {
    runtime = int_version(k_cudart_names, "cudaRuntimeGetVersion", cuda_version_text);
    cudnn = cudnn_version("none");
    nccl = int_version(k_nccl_names, "ncclGetVersion", nccl_version_text);
  } else if (torch_cuda != "none") {
    runtime = torch_cuda;
    cudnn = torch_cudnn == "none" ? "none" : (load ? cudnn_version(torch_cudnn) : torch_cudnn);
    nccl = !torch_nccl ? "none" : (load ? int_version(k_nccl_names, "ncclGetVersion", nccl_version_text) : "unknown");
  }
  fingerprint.set("gpu.cuda_runtime", runtime);
  fingerprint.set("gpu.cudnn", cudnn);
  fingerprint.set("gpu.nccl", nccl);
}

}  // namespace

std::optional<std::string> driver_version_from_procfs(std::string_view text) {
  // "... Kernel Module  535.104.05  ..." or "... Open Kernel Module for x86_64  535.161.07  ...".
  const std::string first_line = util::split(text, '\n').front();
  const size_t module = first_line.find("Kernel Module");
  std::smatch match;
  const std::string rest = module == std::string::npos ? "" : first_line.substr(module);
  if (!std::regex_search(rest, match, std::regex(R"(\s(\d+\.\d+(\.\d+)?)\s)"))) {
    return std::nullopt;
  }
  return match[1].str();
}

std::string cuda_version_text(int code) {
  return fmt::format("{}.{}", code / 1000, (code % 1000) / 10);
}

std::string cudnn_version_text(int64_t code) {
  // cuDNN 9 changed the encoding from major*1000 to major*10000.
  const int64_t major_factor = code >= 90000 ? 10000 : 1000;
  return fmt::format("{}.{}.{}", code / major_factor, (code % major_factor) / 100, code % 100);
}

std::string nccl_version_text(int code) {
  // NCCL 2.9 changed the encoding from major*1000 to major*10000.
  const int major_factor = code >= 20900 ? 10000 : 1000;
  return fmt::format("{}.{}.{}", code / major_factor, (code % major_factor) / 100, code % 100);
}

void probe_gpu(Fingerprint& fingerprint, const FingerprintOptions& options) {
  GpuFacts facts;
  if (!options.load_gpu_libraries || !read_nvml(facts)) {
    read_procfs(options.root, facts);
  }
  fingerprint.set("gpu.count", static_cast<int64_t>(facts.models.size()));
  fingerprint.set("gpu.models", facts.models);
  fingerprint.set("gpu.memory_mib", facts.memory_mib);
  fingerprint.set("gpu.uuids", facts.uuids);
  fingerprint.set("gpu.driver_version", facts.driver_version);
  fingerprint.set("gpu.cuda_driver", facts.cuda_driver);
  fingerprint.set("gpu.source", facts.source);

  set_process_gpu_stack(fingerprint, options.load_gpu_libraries);
}

}  // namespace expctl::env::probes
