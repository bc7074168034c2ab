#pragma once
/// LibTorch's build facts for the environment fingerprint. The env module may not include
/// LibTorch, so it takes these through env::FingerprintOptions::torch_fields; this header
/// itself includes nothing of LibTorch, so the CLI can include it cheaply.

#include <map>
#include <string>

namespace expctl::train {

/// Raw facts, digested by the env module: "version" (TORCH_VERSION of the headers),
/// "show_config" (at::show_config()) and "library" (path of the loaded libtorch_cpu, so that
/// the owning package's version can be read; Debian's 1.13.1 says 1.13.0 in its headers) and
/// "math_libraries" (the loaded BLAS, LAPACK, oneDNN, SLEEF and OpenMP libraries, a path per
/// line as the dynamic linker found them, before their symlinks are resolved).
std::map<std::string, std::string> torch_build_fields();

}  // namespace expctl::train
