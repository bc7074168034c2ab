#include "expctl/util/file_digest.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include <fmt/format.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/cache_dir.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::util {

namespace fs = std::filesystem;

namespace {

// A file written this recently may be written again within the same mtime tick (ext4's is the
// kernel's jiffy-granular clock), keeping the identity the entry was filed under.
constexpr std::int64_t k_settle_ns = 2'000'000'000;

bool is_digest(const std::string& text) {
  if (text.size() != 64) {
    return false;
  }
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::int64_t mtime_ns(const struct stat& info) {
  return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000LL + info.st_mtim.tv_nsec;
}

// The inode change time: set by the kernel on every write and on every utimensat, so an in-place
// edit whose mtime was put back (same size) still changes the file's identity.
std::int64_t ctime_ns(const struct stat& info) {
  return static_cast<std::int64_t>(info.st_ctim.tv_sec) * 1'000'000'000LL + info.st_ctim.tv_nsec;
}

std::optional<fs::path> entry_for(const fs::path& path, const struct stat& info) {
  const auto directory = cache_directory();
  if (!directory) {
    return std::nullopt;
  }
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  const std::string identity = fmt::format(
      "expctl digest v2\n{}\n{}\n{}\n{}\n{}\n{}\n", error ? path.string() : absolute.lexically_normal().string(),
      static_cast<long long>(info.st_size), mtime_ns(info), ctime_ns(info),
      static_cast<unsigned long long>(info.st_dev), static_cast<unsigned long long>(info.st_ino));
  return *directory / "digests" / sha256_hex(identity);
}

}  // namespace

Expected<std::string> file_digest(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return sha256_file(path);  // names the file and the cause (missing, unreadable)
  }
  if (S_ISDIR(info.st_mode)) {
    return make_error(fmt::format("\"{}\" is a directory, not a file", path.string()));
  }
  const auto entry = entry_for(path, info);
  if (entry) {
    if (auto cached = read_file(*entry); cached && is_digest(*cached)) {
      return *cached;
    }
  }
  auto digest = sha256_file(path);
  if (!digest || !entry) {
    return digest;
  }
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (now - mtime_ns(info) >= k_settle_ns) {
    std::error_code ignored;
    fs::create_directories(entry->parent_path(), ignored);
    (void)write_file_atomic(*entry, *digest);  // best effort: the digest stands either way
  }
  return digest;
}

Expected<std::string> folder_digest(const fs::path& folder) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    std::error_code kind;
    if (it->is_regular_file(kind)) {
      files.emplace_back(it->path().lexically_relative(folder).generic_string(), it->path());
    }
  }
  if (error) {
    return make_error(fmt::format("cannot list {}: {}", folder.string(), error.message()));
  }
  std::sort(files.begin(), files.end());
  std::string text = "expctl-folder-1\n";
  for (const auto& [name, path] : files) {
    auto digest = file_digest(path);
    if (!digest) {
      return tl::unexpected(digest.error());
    }
    std::error_code size_error;
    const auto size = fs::file_size(path, size_error);
    text += fmt::format("{:?} {} {}\n", name, size_error ? 0 : size, *digest);
  }
  return sha256_hex(text);
}

}  // namespace expctl::util
