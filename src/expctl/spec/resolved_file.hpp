#pragma once
/// The codec of a run folder's resolved.json: the one writer and the one reader of the file (the
/// ranks and `resume` through run/resolved_run.hpp, `compare`, `gc` and the server's documents
/// through read_resolved_spec). Torch-free and store-free, so compare/ and api/ read it too.
///
/// The file carries a `format_version`. A file of an older version is read through one migration
/// step per version (migrate_resolved_step), never through fallbacks at the places that read a
/// field: a file without the key is version 1 (everything written before the key existed), and
/// its step to version 2 writes down the defaults the trainer used to take for the fields such a
/// file may lack; version 3 added distributed.max_restarts. A newer file is refused (upgrade expctl).
///
/// {"format_version": 3, "spec": {...every field...}, "inputs": {path: sha256}, "spec_file": "/abs",
///  "launch": {"nnodes", "node_rank", "master_addr", "master_port"}}

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace expctl::spec {

/// Name of the file in a run folder that holds the resolved spec and how the node was launched.
inline constexpr const char* k_resolved_file = "resolved.json";
/// The format_version this expctl writes (and reads up to).
inline constexpr int k_resolved_format = 3;

/// resolved.json's "launch": how this node takes part.
struct ResolvedLaunch {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr{};
  int master_port = 0;
};

/// A resolved.json, in the current format whatever version the file was.
struct ResolvedDocument {
  /// spec::Spec::values(): every field, defaults filled in; an older file's migrated to the
  /// current format (what the ranks train with).
  nlohmann::json spec = nlohmann::json::object();
  /// The spec as the file holds it, before migration: what the run's spec hash was computed
  /// over (`resume` hashes these values again: a field a migration filled in would enter the hash
  /// where the run's did not hold it).
  nlohmann::json recorded_spec = nlohmann::json::object();
  /// spec::Spec::input_paths(): absolute path -> SHA-256 of every input file the hash covers;
  /// empty for runs recorded before it existed.
  nlohmann::json inputs = nlohmann::json::object();
  std::string spec_file{};  ///< absolute
  ResolvedLaunch launch{};
  int nproc_per_node = 1;                  ///< the spec's distributed.nproc_per_node (checked: at least 1)
  int format_version = k_resolved_format;  ///< the file's own, before migration
};

/// Why a text is not a resolved.json this expctl reads (UsageError's text is the caller's).
class ResolvedFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The file's text: format_version k_resolved_format, the spec, inputs, spec file and launch.
std::string encode_resolved(const ResolvedDocument& document);

/// The whole document, migrated, every field checked for the type and range expctl writes.
/// Throws ResolvedFormatError saying what is wrong (a newer format: which, and that expctl must be
/// upgraded).
ResolvedDocument decode_resolved(std::string_view text);

/// Only the spec, migrated (readers that show or compare it: the launch part is not checked).
/// Throws ResolvedFormatError.
nlohmann::json decode_resolved_spec(std::string_view text);

/// One migration step: a parsed document of format `version` (1 for a file without
/// format_version) to `version` + 1. Public so that a test pins each step.
nlohmann::json migrate_resolved_step(nlohmann::json document, int version);

/// Writes `run_dir`/resolved.json atomically. Throws util::StoreError (exit code run_failed).
void write_resolved_file(const std::filesystem::path& run_dir, const ResolvedDocument& document);

/// Reads `run_dir`/resolved.json. Throws util::UsageError naming the file when it is missing or
/// malformed ("not a resolved spec written by expctl run (why): ...").
ResolvedDocument read_resolved_file(const std::filesystem::path& run_dir);

/// The migrated spec of the resolved.json at `file` (a path the caller chose), or nullopt when it
/// is missing, unreadable or not one this expctl reads (readers that fall back to the stored spec).
std::optional<nlohmann::json> read_resolved_spec(const std::filesystem::path& file);

}  // namespace expctl::spec
