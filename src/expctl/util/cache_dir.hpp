#pragma once
/// Where expctl keeps what it can compute again (decoded dataset files, LibTorch's build facts).

#include <filesystem>
#include <optional>

namespace expctl::util {

/// EXPCTL_CACHE_DIR when set ("none" or "off" turns the cache off), else $XDG_CACHE_HOME/expctl,
/// else $HOME/.cache/expctl; nullopt when off or when there is no home.
std::optional<std::filesystem::path> cache_directory();

}  // namespace expctl::util
