#include "expctl/launch/shm_segments.hpp"

#include <cstdlib>
#include <string>

namespace expctl::launch {

std::filesystem::path shm_segment_directory() {
  const char* chosen = std::getenv("EXPCTL_SHM_DIR");
  return chosen != nullptr && *chosen != '\0' ? std::filesystem::path(chosen) : std::filesystem::path("/dev/shm");
}

int remove_shm_segments(const std::vector<pid_t>& pids, const std::filesystem::path& directory) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    for (const pid_t pid : pids) {
      const std::string suffix = "-" + std::to_string(pid);
      if (name.starts_with("expctl-") && name.ends_with(suffix) && std::filesystem::remove(entry.path(), error)) {
        ++removed;
      }
    }
  }
  return removed;
}

}  // namespace expctl::launch
