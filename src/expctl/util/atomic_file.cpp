#include "expctl/util/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <unistd.h>

namespace expctl::util {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int error) {
  if (error == ENOSPC) {
    return "no space left on device (free some disk space and retry)";
  }
  return std::strerror(error);
}

void fsync_directory(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);  // best effort: some filesystems refuse fsync on directories
    ::close(fd);
  }
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

}  // namespace

Expected<void> write_file_atomic(const fs::path& path, std::string_view content) {
  const fs::path tmp = path.parent_path() / (".tmp-" + path.filename().string() + "-" + random_suffix());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return make_error(fmt::format("cannot write \"{}\": {}", path.string(), errno_text(errno)));
  }
  size_t written = 0;
  int error = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      error = errno;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (error == 0 && ::fsync(fd) != 0) {
    error = errno;
  }
  if (::close(fd) != 0 && error == 0) {
    error = errno;
  }
  if (error == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = errno;
  }
  if (error != 0) {
    ::unlink(tmp.c_str());
    return make_error(fmt::format("cannot write \"{}\": {}", path.string(), errno_text(error)));
  }
  fsync_directory(path.parent_path());
  return {};
}

Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(fmt::format("cannot read \"{}\": {}", path.string(), std::strerror(errno)));
  }
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return make_error(fmt::format("error while reading \"{}\"", path.string()));
  }
  return content;
}

Expected<void> publish_directory(const fs::path& staging, const fs::path& target) {
  std::error_code ec;
  if (fs::exists(target, ec)) {
    return make_error(fmt::format("cannot create \"{}\": it already exists", target.string()));
  }
  // rename(2) of a directory onto a non-existent name is atomic on POSIX filesystems.
  if (std::rename(staging.c_str(), target.c_str()) != 0) {
    return make_error(fmt::format("cannot create \"{}\": {}", target.string(), errno_text(errno)));
  }
  fsync_directory(target.parent_path());
  return {};
}

}  // namespace expctl::util
