#include "expctl/util/malloc_tuning.hpp"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace expctl::util {

namespace {

std::string tune_malloc(std::string_view purpose) {
  if (const char* setting = std::getenv("EXPCTL_MALLOC_TUNING");
      setting != nullptr && std::string_view(setting) == "off") {
    return "malloc: glibc defaults (EXPCTL_MALLOC_TUNING=off)";
  }
  if (const char* tunables = std::getenv("GLIBC_TUNABLES");
      tunables != nullptr && std::string_view(tunables).find("glibc.malloc.") != std::string_view::npos) {
    return "malloc: as GLIBC_TUNABLES sets it";
  }
  const bool mmap_ok = ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(k_training_mmap_threshold)) == 1;
  const bool trim_ok = ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(k_training_trim_threshold)) == 1;
  if (!mmap_ok || !trim_ok) {
    return fmt::format("malloc: glibc refused the {} thresholds; defaults kept", purpose);
  }
  return fmt::format("malloc: blocks up to {} MiB from the heap, up to {} MiB kept after free",
                     k_training_mmap_threshold >> 20, k_training_trim_threshold >> 20);
}

}  // namespace

std::string tune_malloc_for_training() {
  return tune_malloc("training");
}

std::string tune_malloc_for_bulk_reads() {
  return tune_malloc("bulk read");
}

}  // namespace expctl::util
