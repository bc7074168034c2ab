#include "expctl/train/decoded_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

#include "expctl/util/atomic_file.hpp"
#include "expctl/util/crc32c.hpp"
#include "expctl/util/error.hpp"
#include "expctl/util/log.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::train {
namespace {

using util::TrainError;
namespace fs = std::filesystem;

/// Closes a file descriptor on scope exit.
struct Descriptor {
  int fd;
  explicit Descriptor(int value) : fd(value) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

/// Reads exactly `size` bytes at `offset`; false on a short read or an error.
bool read_at(int fd, void* buffer, std::size_t size, off_t offset) {
  auto* out = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t count = ::pread(fd, out, size, offset);
    if (count <= 0) {
      return false;
    }
    out += count;
    size -= static_cast<std::size_t>(count);
    offset += count;
  }
  return true;
}

/// What a gzip file says about its (last member's) content: CRC-32 and length modulo 2^32.
struct GzipTrailer {
  std::uint32_t crc = 0;
  std::uint32_t size = 0;
};

std::uint32_t little_endian_u32(const unsigned char* bytes) {
  return std::uint32_t{bytes[0]} | (std::uint32_t{bytes[1]} << 8) | (std::uint32_t{bytes[2]} << 16) |
         (std::uint32_t{bytes[3]} << 24);
}

/// The trailer when `fd` is a gzip file (magic 1f 8b), else nullopt.
std::optional<GzipTrailer> gzip_trailer(int fd, const struct stat& info) {
  unsigned char magic[2] = {};
  unsigned char tail[8] = {};
  if (info.st_size < 18 || !read_at(fd, magic, sizeof(magic), 0) || magic[0] != 0x1f || magic[1] != 0x8b ||
      !read_at(fd, tail, sizeof(tail), info.st_size - 8)) {
    return std::nullopt;
  }
  return GzipTrailer{little_endian_u32(tail), little_endian_u32(tail + 4)};
}

std::uint32_t crc32_of(std::span<const std::uint8_t> bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const std::uint8_t* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(left, 1U << 30));
    crc = ::crc32(crc, data, chunk);
    data += chunk;
    left -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

// Deflate cannot shrink data more than 1032:1, so a reservation beyond that many times the file
// is a trailer that lies (a crafted file asking for 4 GiB up front); it grows as bytes come instead.
constexpr std::size_t k_max_deflate_ratio = 1032;

// Reads a whole file through zlib, which passes plain files through unchanged, refusing to
// inflate more than inflate_limit_bytes() (a gzip bomb would otherwise take every rank's memory).
std::vector<std::uint8_t> inflate_file(const fs::path& path, std::size_t expected_size, std::size_t file_size) {
  std::unique_ptr<gzFile_s, decltype(&::gzclose)> file(::gzopen(path.c_str(), "rb"), &::gzclose);
  EXPCTL_CHECK(file != nullptr, TrainError, "{}: cannot open", path.string());
  ::gzbuffer(file.get(), 1U << 18);
  const std::size_t limit = inflate_limit_bytes();
  std::vector<std::uint8_t> bytes;
  bytes.reserve(std::min({expected_size, file_size * k_max_deflate_ratio, limit}));
  std::vector<std::uint8_t> chunk(1 << 20);
  for (;;) {
    const int count = ::gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    int code = Z_OK;
    std::string message = ::gzerror(file.get(), &code);
    // zlib prefixes its message with the path, which ours already starts with.
    if (const auto prefix = path.string() + ": "; message.rfind(prefix, 0) == 0) {
      message.erase(0, prefix.size());
    }
    // A cut-off gzip stream ends with Z_BUF_ERROR ("unexpected end of file"), a damaged one with
    // Z_DATA_ERROR; both would otherwise look like a short but valid file.
    EXPCTL_CHECK(count >= 0 && code == Z_OK, TrainError, "{}: corrupt or truncated gzip data ({})", path.string(),
                 message);
    if (count == 0) {
      break;
    }
    EXPCTL_CHECK(bytes.size() + static_cast<std::size_t>(count) <= limit, TrainError,
                 "{}: inflates to more than {} MiB, the limit for one data file (a gzip bomb, or a larger file than "
                 "expected): set EXPCTL_INFLATE_LIMIT_MB to raise it",
                 path.string(), limit >> 20);
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + count);
  }
  return bytes;
}

fs::path cache_entry(const fs::path& directory, const fs::path& source, const struct stat& info) {
  std::error_code error;
  const fs::path absolute = fs::absolute(source, error);
  const std::string identity =
      fmt::format("expctl decoded v2\n{}\n{}\n{}.{:09}\n{}\n{}\n", error ? source.string() : absolute.string(),
                  static_cast<long long>(info.st_size), static_cast<long long>(info.st_mtim.tv_sec),
                  static_cast<long>(info.st_mtim.tv_nsec), static_cast<unsigned long long>(info.st_dev),
                  static_cast<unsigned long long>(info.st_ino));
  return directory / "decoded" / (util::sha256_hex(identity) + ".raw");
}

// An entry is the decoded bytes, then a footer: "xc32" and the CRC-32C of those bytes (u32 LE).
// The source's gzip CRC-32 was checked once, when the entry was written; every read checks the
// CRC-32C, which this processor computes twice as fast (10 ms instead of 22 ms for
// Fashion-MNIST's 47 MB of training images, on every rank of every run). The footer came with
// "v2" in the entry's name: builds before it (no footer) keep their own entries, so two expctl
// versions sharing a cache (a nightly comparing builds) do not rewrite each other's on every run.
constexpr std::string_view k_footer_magic = "xc32";
constexpr std::size_t k_footer_bytes = 8;

std::string_view chars_of(std::span<const std::uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// Reads the first `size` bytes of `fd` into `out`; false on an error or a file that is shorter.
bool read_exactly(int fd, std::uint8_t* out, std::size_t size) {
  for (std::size_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (got <= 0) {
      return false;
    }
    done += static_cast<std::size_t>(got);
  }
  return true;
}

/// The cached copy, read, when its length matches the trailer and its CRC-32C the footer.
std::optional<SharedBytes> read_cached(const fs::path& entry, const GzipTrailer& trailer) {
  Descriptor fd(::open(entry.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info {};
  if (fd.fd < 0 || ::fstat(fd.fd, &info) != 0 || info.st_size < static_cast<off_t>(k_footer_bytes) ||
      static_cast<std::uint32_t>(static_cast<std::uint64_t>(info.st_size) - k_footer_bytes) != trailer.size) {
    return std::nullopt;
  }
  const auto copy = SharedBytes::read(fd.fd, static_cast<std::size_t>(info.st_size));
  if (!copy) {
    return std::nullopt;
  }
  const std::size_t size = copy->size() - k_footer_bytes;
  const auto footer = copy->span().subspan(size);
  if (chars_of(footer.first(4)) != k_footer_magic ||
      util::crc32c(chars_of(copy->span().first(size))) != little_endian_u32(footer.data() + 4)) {
    util::log::debug(fmt::format("ignoring damaged cache entry {}", entry.string()));
    return std::nullopt;
  }
  return copy->first(size);
}

/// Publishes `bytes` and their footer as `entry`, atomically; gives up quietly (the cache is
/// optional).
void write_cached(const fs::path& entry, const std::vector<std::uint8_t>& bytes) {
  std::error_code error;
  fs::create_directories(entry.parent_path(), error);
  std::string content(chars_of(bytes));
  content += k_footer_magic;
  const std::uint32_t crc = util::crc32c(chars_of(bytes));
  for (int shift = 0; shift < 32; shift += 8) {
    content.push_back(static_cast<char>((crc >> shift) & 0xFFu));
  }
  const auto written = util::write_file_atomic(entry, content);
  if (!written) {
    util::log::debug(fmt::format("not caching {}: {}", entry.string(), written.error().message));
  }
}

}  // namespace

SharedBytes::SharedBytes(std::vector<std::uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  m_bytes = *owned;
  m_owner = std::move(owned);
}

std::optional<SharedBytes> SharedBytes::read(int fd, std::size_t size) {
  if (size == 0) {
    return SharedBytes(std::vector<std::uint8_t>{});
  }
  // One huge page more than needed, so that the copy can start on a huge-page boundary.
  constexpr std::size_t k_huge_page = std::size_t{2} << 20;
  const std::size_t length = (size + k_huge_page - 1) / k_huge_page * k_huge_page + k_huge_page;
  void* area = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) {
    return std::nullopt;
  }
  SharedBytes bytes;
  bytes.m_owner = std::shared_ptr<const void>(area, [length](const void* mapped) {
    ::munmap(const_cast<void*>(mapped), length);
  });
  const auto address = (reinterpret_cast<std::uintptr_t>(area) + k_huge_page - 1) / k_huge_page * k_huge_page;
  auto* start = reinterpret_cast<std::uint8_t*>(address);
  const std::size_t usable = length - (address - reinterpret_cast<std::uintptr_t>(area));
  ::madvise(start, usable, MADV_HUGEPAGE);  // advice: without transparent huge pages, 4 KiB pages
  if (!read_exactly(fd, start, size)) {
    return std::nullopt;
  }
  ::mprotect(start, usable, PROT_READ);
  bytes.m_bytes = {start, size};
  return bytes;
}

SharedBytes SharedBytes::first(std::size_t count) const {
  SharedBytes prefix = *this;
  prefix.m_bytes = m_bytes.first(std::min(count, m_bytes.size()));
  return prefix;
}

std::size_t inflate_limit_bytes() {
  if (const char* text = std::getenv("EXPCTL_INFLATE_LIMIT_MB"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    const unsigned long long megabytes = std::strtoull(text, &end, 10);
    EXPCTL_CHECK(end != text && *end == '\0' && megabytes > 0 && megabytes < (1ULL << 40), TrainError,
                 "EXPCTL_INFLATE_LIMIT_MB={} is not a positive number of MiB", text);
    return static_cast<std::size_t>(megabytes) << 20;
  }
  return k_default_inflate_limit_bytes;
}

SharedBytes read_decompressed(const fs::path& path) {
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    const int error = errno;
    EXPCTL_CHECK(error != ENOENT, TrainError, "{}: no such file", path.string());
    throw TrainError(fmt::format("{}: cannot open ({})", path.string(), std::strerror(error)));
  }
  struct stat info {};
  EXPCTL_CHECK(::fstat(fd.fd, &info) == 0 && S_ISREG(info.st_mode), TrainError, "{}: not a regular file",
               path.string());
  const auto trailer = gzip_trailer(fd.fd, info);
  const auto directory = trailer ? cache_directory() : std::nullopt;
  if (!directory) {
    return SharedBytes(
        inflate_file(path, static_cast<std::size_t>(info.st_size), static_cast<std::size_t>(info.st_size)));
  }
  const fs::path entry = cache_entry(*directory, path, info);
  if (auto cached = read_cached(entry, *trailer)) {
    return std::move(*cached);
  }
  auto bytes = inflate_file(path, trailer->size, static_cast<std::size_t>(info.st_size));
  // zlib has checked the CRC of the stream it inflated; a multi-member file's trailer covers only
  // its last member, so such a file is simply never cached.
  if (static_cast<std::uint32_t>(bytes.size()) == trailer->size && crc32_of(bytes) == trailer->crc) {
    write_cached(entry, bytes);
  }
  return SharedBytes(std::move(bytes));
}

}  // namespace expctl::train
