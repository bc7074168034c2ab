#pragma once
/// Reading dataset files whole, gzip'd or not, with a cache of decompressed copies.
///
/// Inflating Fashion-MNIST's 26 MB of gzip costs every rank about 0.3 s before its first step, on
/// every run. The first reader of a gzip file therefore keeps its decompressed bytes under
/// `cache_directory()/decoded/`, named by the SHA-256 of the source's identity (absolute path,
/// size, modification time, device, inode), as ccache's direct mode names a result by its
/// inputs. The copy is written only once its bytes match the source's own gzip trailer (length
/// and CRC-32), with a footer holding their CRC-32C. A later reader takes it only if its length
/// equals the trailer's and its CRC-32C the footer's, so a stale, truncated or damaged copy is
/// never used: it is decoded again and replaced. Copies are published with an atomic rename
/// (ranks may race to write the same one). The cache is only an accelerator: when it cannot be
/// read or written (read-only home, full disk) the file is decoded as before and nothing fails.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "expctl/util/cache_dir.hpp"

namespace expctl::train {

using util::cache_directory;

/// Read-only bytes shared by whoever holds a copy of this handle (a dataset and the tensors that
/// wrap it), owned by the handle: a vector, or a decode-cache entry read into memory of its own.
class SharedBytes {
 public:
  SharedBytes() = default;
  explicit SharedBytes(std::vector<std::uint8_t> bytes);
  /// `bytes`, kept alive by `owner` (e.g. a file mapping that unmaps when the last copy goes).
  SharedBytes(std::span<const std::uint8_t> bytes, std::shared_ptr<const void> owner)
      : m_bytes(bytes), m_owner(std::move(owner)) {}
  /// The first `size` bytes of `fd`, read into private memory that the kernel backs with 2 MiB
  /// pages where transparent huge pages are on ("madvise" or "always"), then made read-only;
  /// nullopt when it cannot be allocated or read. A batch gathers rows scattered over the whole
  /// set: through 4 KiB pages (a mapping of the file, as before) nearly every row took a TLB miss,
  /// 0.2-0.6 ms of a 16-36 ms step on the development VM against ~0.1 ms now (docs/run.md).
  static std::optional<SharedBytes> read(int fd, std::size_t size);
  /// The first `count` bytes (all of them when there are fewer), sharing this handle's owner.
  SharedBytes first(std::size_t count) const;

  const std::uint8_t* data() const { return m_bytes.data(); }
  std::size_t size() const { return m_bytes.size(); }
  std::span<const std::uint8_t> span() const { return m_bytes; }
  std::uint8_t operator[](std::size_t index) const { return m_bytes[index]; }
  /// Keeps the bytes alive, e.g. for a tensor that wraps them.
  std::shared_ptr<const void> owner() const { return m_owner; }

 private:
  std::span<const std::uint8_t> m_bytes;
  std::shared_ptr<const void> m_owner;
};

/// The most a data file may inflate to: 4 GiB, past the largest single file of the datasets expctl
/// reads (CIFAR-10's batches are 30 MB, Fashion-MNIST's images 47 MB), far below what a gzip
/// bomb asks for (deflate packs up to 1032:1). $EXPCTL_INFLATE_LIMIT_MB sets another.
inline constexpr std::size_t k_default_inflate_limit_bytes = std::size_t{4} << 30;
/// k_default_inflate_limit_bytes, or $EXPCTL_INFLATE_LIMIT_MB MiB (TrainError when that is not a positive number).
std::size_t inflate_limit_bytes();

/// The whole content of `path`, decompressed when it is gzip. Throws TrainError naming the file
/// when it is missing, unreadable, corrupt or truncated gzip, or inflates past inflate_limit_bytes().
SharedBytes read_decompressed(const std::filesystem::path& path);

}  // namespace expctl::train
