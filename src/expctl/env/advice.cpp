#include "expctl/env/advice.hpp"

#include <fmt/format.h>

namespace expctl::env {

namespace {

// software.libtorch_math_libraries describes each file as "PATH (PACKAGE VERSION)"; netlib's
// reference BLAS is Debian's libblas3 (OpenBLAS is libopenblas0-*, BLIS libblis*).
std::optional<std::string> reference_blas(const Fingerprint& fingerprint) {
  const nlohmann::json* libraries = fingerprint.find("software.libtorch_math_libraries");
  if (libraries == nullptr || !libraries->is_object() || !libraries->contains("libblas.so.3") ||
      !(*libraries)["libblas.so.3"].is_string()) {
    return std::nullopt;
  }
  const auto described = (*libraries)["libblas.so.3"].get<std::string>();
  if (described.find(" (libblas3 ") == std::string::npos) {
    return std::nullopt;
  }
  return described.substr(0, described.find(" ("));
}

}  // namespace

std::vector<std::string> advice(const Fingerprint& fingerprint) {
  std::vector<std::string> notes;
  if (const auto blas = reference_blas(fingerprint)) {
    notes.push_back(fmt::format(
        "LibTorch's BLAS is netlib's reference BLAS ({}, package libblas3): float32 matrix products run "
        "several times slower there than with OpenBLAS, and a float32 model on the CPU spends most of its step "
        "in them (bf16 AMP runs on oneDNN instead). `apt-get install libopenblas0-pthread` makes OpenBLAS the "
        "system's libblas.so.3; runs then record another software.libtorch_math_libraries and their numbers "
        "change (docs/models.md, \"The BLAS\")",
        *blas));
  }
  return notes;
}

}  // namespace expctl::env
