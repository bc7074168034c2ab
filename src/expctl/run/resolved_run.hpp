#pragma once
/// The resolved run: what the ranks (and `expctl resume`) read back from the run folder's
/// resolved.json — the spec's values with every default filled in, the spec file, and how this
/// node takes part (a launch::LaunchRequest: the one type for a node's placement). The file's
/// codec, its format version and the migrations of older files are spec/resolved_file.hpp's;
/// this adds only the launch types.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "expctl/launch/launch_plan.hpp"
#include "expctl/spec/resolved_file.hpp"

namespace expctl::run {

/// Name of the file in a run folder that holds the resolved spec and how the node was launched.
inline constexpr const char* k_resolved_file = spec::k_resolved_file;

struct ResolvedRun {
  /// spec::Spec::values(): every field, defaults filled in (an older file's migrated to today's
  /// format: spec::migrate_resolved_step).
  nlohmann::json spec;
  /// The spec as the file holds it, unmigrated: what `resume` hashes again (ResolvedDocument's).
  nlohmann::json recorded_spec = nlohmann::json::object();
  /// spec::Spec::input_paths(): absolute path -> SHA-256 of every input file the hash covers;
  /// empty for runs recorded before it existed.
  nlohmann::json inputs = nlohmann::json::object();
  std::string spec_file;  ///< absolute
  /// nnodes, node_rank, master_addr, master_port as resolved.json's "launch" holds them, and
  /// nproc_per_node (the spec's distributed.nproc_per_node, not written twice).
  launch::LaunchRequest node;
};

/// Writes `run` atomically to `run_dir`/resolved.json in the current format. Throws StoreError
/// when it cannot.
void write_resolved_run(const std::filesystem::path& run_dir, const ResolvedRun& run);
/// Reads `run_dir`/resolved.json, migrated. Throws UsageError naming the file when missing or
/// malformed.
ResolvedRun read_resolved_run(const std::filesystem::path& run_dir);

}  // namespace expctl::run
