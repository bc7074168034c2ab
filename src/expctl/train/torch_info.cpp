#include "expctl/train/torch_info.hpp"

#include <dlfcn.h>
#include <link.h>

#include <array>
#include <filesystem>
#include <string_view>

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

// The math libraries loaded with LibTorch, as the dynamic linker found them, one per line
// ("/lib/x86_64-linux-gnu/libblas.so.3"): which BLAS, LAPACK, oneDNN, SLEEF and OpenMP
// runtime a symlink such as Debian's libblas.so.3 alternative leads to decides the numerics,
// and the env module resolves the links when it fingerprints, so a switched alternative shows.
std::string loaded_math_libraries() {
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        constexpr std::array<std::string_view, 7> k_kinds = {"blas", "lapack", "dnnl", "sleef", "gomp", "iomp", "mkl"};
        const std::string name = std::filesystem::path(info->dlpi_name).filename().string();
        for (const auto kind : k_kinds) {
          if (name.starts_with("lib") && name.find(kind) != std::string::npos) {
            *static_cast<std::string*>(data) += std::string(info->dlpi_name) + "\n";
            break;
          }
        }
        return 0;
      },
      &found);
  return found;
}

}  // namespace

std::map<std::string, std::string> torch_build_fields() {
  return {{"version", TORCH_VERSION},
          {"show_config", at::show_config()},
          {"library", loaded_library()},
          {"math_libraries", loaded_math_libraries()}};
}

}  // namespace expctl::train
