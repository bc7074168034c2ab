#pragma once
/// Reading dataset files whole, gzip'd or not, with a cache of decompressed copies.
///
/// Inflating Fashion-MNIST's 26 MB of gzip costs every rank about 0.3 s before its first step, on
/// every run. The first reader of a gzip file therefore keeps its decompressed bytes under
/// `cache_directory()/decoded/`, named by the SHA-256 of the source's identity (absolute path,
/// size, modification time, device, inode), as ccache's direct mode names a result by its
/// inputs. A later reader takes the copy only if its length and CRC-32 equal the ones in the
/// source's own gzip trailer, so a stale, truncated or damaged copy is never used: it is decoded
/// again and replaced. Copies are published with an atomic rename (ranks may race to write the
/// same one). The cache is only an accelerator: when it cannot be read or written (read-only
/// home, full disk) the file is decoded as before and nothing fails.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "expctl/util/cache_dir.hpp"

namespace expctl::train {

using util::cache_directory;

/// The whole content of `path`, decompressed when it is gzip. Throws TrainError naming the file
/// when it is missing, unreadable, or corrupt or truncated gzip.
std::vector<std::uint8_t> read_decompressed(const std::filesystem::path& path);

}  // namespace expctl::train
