#include "expctl/train/torch_info.hpp"

#include <dlfcn.h>

// Only the two light headers: at::show_config() and TORCH_VERSION.
#include <ATen/Version.h>
#include <torch/version.h>

namespace expctl::train {

namespace {

// The file at::show_config() was loaded from: libtorch_cpu.so.* for every LibTorch build.
std::string loaded_library() {
  Dl_info info{};
  const auto* address = reinterpret_cast<const void*>(&at::show_config);
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) {
    return "none";
  }
  return info.dli_fname;
}

}  // namespace

std::map<std::string, std::string> torch_build_fields() {
  return {{"version", TORCH_VERSION}, {"show_config", at::show_config()}, {"library", loaded_library()}};
}

}  // namespace expctl::train
