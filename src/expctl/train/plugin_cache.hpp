#pragma once
/// LibTorch's build facts (train/torch_info.hpp) kept between commands: they do not change as
/// long as the plugin and the LibTorch library it loads are the same files, and reading them
/// costs loading LibTorch (0.3-0.7 s of static initialisers). `expctl run` needs them for the
/// fingerprint before it starts the ranks; with this cache it starts them without loading
/// LibTorch itself. Torch-free.
///
/// An entry lives in cache_directory()/torch-fields/<key>.json, the key a SHA-256 over the
/// plugin's path, size and modification time, LD_LIBRARY_PATH and expctl's build id; it holds
/// the fields and the size and modification time of the LibTorch file they name, which are
/// checked on every read (a LibTorch replaced in place misses). EXPCTL_CACHE_DIR=off disables it.

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace expctl::train::plugin {

using TorchFields = std::map<std::string, std::string>;

/// The cached fields for the plugin at `plugin`, or nullopt (no entry, a stale one, no cache).
std::optional<TorchFields> cached_torch_fields(const std::filesystem::path& plugin);

/// Keeps `fields` (read from the plugin at `plugin`) for the next command; failures are ignored.
void cache_torch_fields(const std::filesystem::path& plugin, const TorchFields& fields);

}  // namespace expctl::train::plugin
