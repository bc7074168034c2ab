#pragma once
/// Reading a run's folder (resolved.json, logs) for the documents the CLI and the server build.
/// A run folder's path is a stored string: the CLI trusts it (the user's own store, as before),
/// the server does not, and reads only files whose real path lies under the store's runs root.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"

namespace expctl::api {

/// Which run folders a document may read.
enum class FolderPolicy {
  trust_stored_path,  ///< the run's stored run_dir, wherever it points (the CLI)
  under_runs_root,    ///< only a file whose real path is under the store's runs root (the server)
  none,               ///< no file at all
};

struct FolderAccess {
  FolderPolicy policy = FolderPolicy::trust_stored_path;
};

/// `run.run_dir / relative` when `access` allows reading it and it is a regular file; `relative`
/// is a constant of the caller ("resolved.json", "logs/rank-0.log"), never a request's string.
std::optional<std::filesystem::path> run_folder_file(const store::Store& store, const store::RunRecord& run,
                                                     std::string_view relative, const FolderAccess& access);

/// The "spec" object of the run folder's resolved.json (every field, defaults filled in), or null.
nlohmann::json resolved_spec(const store::Store& store, const store::RunRecord& run, const FolderAccess& access);

/// The value at a dotted path ("train.max_steps") of a nested object, or nullptr.
const nlohmann::json* json_at(const nlohmann::json& tree, std::string_view path);

}  // namespace expctl::api
