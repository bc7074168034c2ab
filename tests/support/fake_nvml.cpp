// A stand-in for NVIDIA's libnvidia-ml.so.1 (loaded through EXPCTL_NVML_LIBRARY): the NVML entry
// points expctl calls (util/nvml.cpp), answering as one GPU would on which every child of the
// calling process (a supervisor's ranks) computes. It tests what expctl does with NVML's answers
// on a machine without a GPU; that the real library answers so is scripts/gpu-check.sh's to see.
//   FAKE_NVML_UTILIZATION  the device's utilization in percent (default 42)
//   FAKE_NVML_MIB          the device memory each process holds in MiB (default 123)

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <dirent.h>

namespace {

struct ProcessInfo {  // nvmlProcessInfo_t of _v2/_v3
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

unsigned long long number(const char* name, unsigned long long fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : fallback;
}

std::vector<unsigned int> children_of_self() {
  std::vector<unsigned int> children;
  const std::string tasks = "/proc/" + std::to_string(::getpid()) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) {
    return children;
  }
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') {
      continue;
    }
    std::ifstream in(tasks + "/" + entry->d_name + "/children");
    for (unsigned int child = 0; in >> child;) {
      children.push_back(child);
    }
  }
  ::closedir(dir);
  return children;
}

int copy_string(const char* text, char* buffer, unsigned int size) {
  if (std::strlen(text) + 1 > size) {
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  std::strcpy(buffer, text);
  return 0;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  return 0;
}
int nvmlShutdown() {
  return 0;
}
int nvmlSystemGetDriverVersion(char* buffer, unsigned int size) {
  return copy_string("550.54.15", buffer, size);
}
int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12040;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) {
    return 2;  // NVML_ERROR_INVALID_ARGUMENT
  }
  *device = reinterpret_cast<void*>(0x1);
  return 0;
}
int nvmlDeviceGetName(void*, char* buffer, unsigned int size) {
  return copy_string("Fake GPU 80GB", buffer, size);
}
int nvmlDeviceGetUUID(void*, char* buffer, unsigned int size) {
  return copy_string("GPU-00000000-fake-0000-0000-000000000000", buffer, size);
}
int nvmlDeviceGetMemoryInfo(void*, Memory* memory) {
  *memory = {80ULL << 30, 70ULL << 30, 10ULL << 30};
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, Utilization* rates) {
  *rates = {static_cast<unsigned int>(number("FAKE_NVML_UTILIZATION", 42)), 10};
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void*, unsigned int* count, ProcessInfo* infos) {
  const auto children = children_of_self();
  if (*count < children.size()) {
    *count = static_cast<unsigned int>(children.size());
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    infos[i] = {children[i], number("FAKE_NVML_MIB", 123) << 20, 0, 0};
  }
  *count = static_cast<unsigned int>(children.size());
  return 0;
}

}  // extern "C"
