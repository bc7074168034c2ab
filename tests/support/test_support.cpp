#include "support/test_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <netinet/in.h>

namespace expctl::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device device;
  const fs::path base = fs::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path candidate = base / fmt::format("expctl-test-{:08x}{:08x}", device(), device());
    if (fs::create_directory(candidate)) {
      m_path = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

fs::path TempDir::write(const std::string& name, const std::string& content) const {
  const fs::path target = m_path / name;
  fs::create_directories(target.parent_path());
  std::ofstream out(target, std::ios::binary);
  out << content;
  return target;
}

namespace {

bool env_is_one(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}

/// Whether `need` is among EXPCTL_ALLOWED_SKIPS (keys separated by spaces or commas).
bool skip_allowed(const std::string& need) {
  const char* allowed = std::getenv("EXPCTL_ALLOWED_SKIPS");
  if (allowed == nullptr) {
    return false;
  }
  std::string list(allowed);
  std::replace(list.begin(), list.end(), ',', ' ');
  std::istringstream words(list);
  for (std::string word; words >> word;) {
    if (word == need) {
      return true;
    }
  }
  return false;
}

}  // namespace

void skip(const std::string& need, const std::string& reason) {
  if (env_is_one("EXPCTL_REQUIRE_ALL") && !skip_allowed(need)) {
    FAIL("EXPCTL_REQUIRE_ALL=1 but this test cannot run here: " << need << " is missing (" << reason
                                                                << "); provide it, or name \"" << need
                                                                << "\" in EXPCTL_ALLOWED_SKIPS with the reason");
  }
  WARN("SKIPPED, not passed: " << reason << " [needs: " << need << "]");
}

int timeout_scale() {
  const char* text = std::getenv("EXPCTL_TEST_TIMEOUT_SCALE");
  const int scale = text == nullptr ? 1 : std::atoi(text);
  return scale > 1 ? scale : 1;
}

fs::path source_dir() { return EXPCTL_SOURCE_DIR; }

fs::path build_dir() { return EXPCTL_BUILD_DIR; }

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace expctl::test
