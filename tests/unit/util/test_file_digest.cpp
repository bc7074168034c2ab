#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "expctl/util/file_digest.hpp"
#include "expctl/util/sha256.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;
using expctl::util::file_digest;
using expctl::util::sha256_hex;

namespace {

/// Points EXPCTL_CACHE_DIR at `dir` for the test's lifetime and restores it after.
struct CacheDirOverride {
  explicit CacheDirOverride(const fs::path& dir) {
    if (const char* old = std::getenv("EXPCTL_CACHE_DIR")) {
      m_old = old;
    }
    ::setenv("EXPCTL_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirOverride() {
    if (m_old.empty()) {
      ::unsetenv("EXPCTL_CACHE_DIR");
    } else {
      ::setenv("EXPCTL_CACHE_DIR", m_old.c_str(), 1);
    }
  }
  std::string m_old;
};

void set_mtime_seconds_ago(const fs::path& path, int seconds) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
}

std::size_t entries(const fs::path& cache) {
  const fs::path dir = cache / "digests";
  return fs::exists(dir) ? static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {})) : 0;
}

}  // namespace

TEST_CASE("file_digest: the SHA-256 of the bytes, remembered under the file's identity") {
  expctl::test::TempDir dir;
  CacheDirOverride cache(dir / "cache");
  const auto data = dir.write("data.bin", "abc");
  set_mtime_seconds_ago(data, 60);
  REQUIRE(file_digest(data).value() == sha256_hex("abc"));
  CHECK(entries(dir / "cache") == 1);

  // The remembered entry is what a second call returns: replace it to prove it is read.
  const fs::path entry = fs::directory_iterator(dir / "cache" / "digests")->path();
  std::ofstream(entry, std::ios::trunc) << sha256_hex("remembered");
  CHECK(file_digest(data).value() == sha256_hex("remembered"));

  // A malformed entry is not trusted.
  std::ofstream(entry, std::ios::trunc) << "not a digest";
  CHECK(file_digest(data).value() == sha256_hex("abc"));
}

TEST_CASE("file_digest: a changed file gets a new digest (size or mtime changes its identity)") {
  expctl::test::TempDir dir;
  CacheDirOverride cache(dir / "cache");
  const auto data = dir.write("data.bin", "abc");
  set_mtime_seconds_ago(data, 60);
  REQUIRE(file_digest(data).value() == sha256_hex("abc"));
  dir.write("data.bin", "abd");  // same size, new mtime
  set_mtime_seconds_ago(data, 30);
  CHECK(file_digest(data).value() == sha256_hex("abd"));
}

TEST_CASE("file_digest: a file written just now is hashed but not remembered") {
  expctl::test::TempDir dir;
  CacheDirOverride cache(dir / "cache");
  const auto data = dir.write("fresh.bin", "xyz");
  CHECK(file_digest(data).value() == sha256_hex("xyz"));
  CHECK(entries(dir / "cache") == 0);
}

TEST_CASE("file_digest: missing files and directories are errors naming the path, no cache still works") {
  expctl::test::TempDir dir;
  CacheDirOverride cache(fs::path("off"));
  const auto missing = file_digest(dir / "nope.npy");
  REQUIRE_FALSE(missing.has_value());
  CHECK_THAT(missing.error().message, Catch::Contains("nope.npy"));
  const auto directory = file_digest(dir.path());
  REQUIRE_FALSE(directory.has_value());
  CHECK_THAT(directory.error().message, Catch::Contains("is a directory"));
  CHECK(file_digest(dir.write("a.bin", "abc")).value() == sha256_hex("abc"));
}

TEST_CASE(
    "file_digest: an in-place edit of the same size with its mtime put back gets a new digest (the inode "
    "change time is part of the identity)") {
  expctl::test::TempDir dir;
  CacheDirOverride cache(dir / "cache");
  const auto data = dir.write("data.bin", "abc");
  set_mtime_seconds_ago(data, 60);
  const auto mtime = fs::last_write_time(data);
  REQUIRE(file_digest(data).value() == sha256_hex("abc"));
  REQUIRE(entries(dir / "cache") == 1);
  {
    std::fstream edit(data, std::ios::in | std::ios::out | std::ios::binary);  // no truncation: same inode
    edit.seekp(2);
    edit.put('d');
  }
  fs::last_write_time(data, mtime);  // size, mtime, device and inode as remembered: only ctime moved
  CHECK(fs::file_size(data) == 3);
  CHECK(fs::last_write_time(data) == mtime);
  CHECK(file_digest(data).value() == sha256_hex("abd"));
}
