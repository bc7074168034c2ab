#include "expctl/util/cache_dir.hpp"

#include <cstdlib>
#include <string>

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

}  // namespace expctl::util
