#include "expctl/util/cache_dir.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace expctl::util {

namespace fs = std::filesystem;

std::optional<fs::path> cache_directory() {
  if (const char* explicit_dir = std::getenv("EXPCTL_CACHE_DIR"); explicit_dir != nullptr && *explicit_dir != 0) {
    const std::string value = explicit_dir;
    if (value == "none" || value == "off") {
      return std::nullopt;
    }
    return fs::path(value);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    return fs::path(xdg) / "expctl";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return fs::path(home) / ".cache" / "expctl";
  }
  return std::nullopt;
}

std::string file_identity(const fs::path& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    return "";
  }
  return fmt::format("{}:{}", info.st_size, info.st_mtim.tv_sec * 1'000'000'000LL + info.st_mtim.tv_nsec);
}

}  // namespace expctl::util
