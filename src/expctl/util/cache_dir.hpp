#pragma once
/// Where expctl keeps what it can compute again (decoded dataset files, LibTorch's build facts).

#include <filesystem>
#include <optional>
#include <string>

namespace expctl::util {

/// EXPCTL_CACHE_DIR when set ("none" or "off" turns the cache off), else $XDG_CACHE_HOME/expctl,
/// else $HOME/.cache/expctl; nullopt when off or when there is no home.
std::optional<std::filesystem::path> cache_directory();

/// "size:mtime-in-ns" of a file, or empty when it cannot be read: what a cache entry keys on to
/// notice that a file it was computed from was replaced or updated.
std::string file_identity(const std::filesystem::path& file);

}  // namespace expctl::util
