#include "support/test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <random>

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
