#include "expctl/util/find_executable.hpp"

#include <unistd.h>

#include "expctl/util/strings.hpp"

namespace expctl::util {

std::optional<std::filesystem::path> find_executable(const std::string& name, const std::string& path) {
  for (const std::string& dir : split(path, ':')) {
    const std::filesystem::path file = std::filesystem::path(dir.empty() ? "." : dir) / name;
    std::error_code error;
    if (std::filesystem::is_regular_file(file, error) && ::access(file.c_str(), X_OK) == 0) {
      return file;
    }
  }
  return std::nullopt;
}

}  // namespace expctl::util
