#pragma once
/// The pinned-stack profile a spec names with `env`: found on disk and read as TOML, only so
/// that its content can enter the spec hash. The env module interprets it.

#include <filesystem>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "expctl/util/diagnostic.hpp"

namespace expctl::spec {

/// Looks `env` up: an absolute path as is; a relative one in the spec's directory, then in each
/// parent directory in turn (so `envs/x.toml` works from `experiments/` and from the root).
/// Returns the absolute, normalised path of the first existing regular file, or nullopt.
std::optional<std::filesystem::path> resolve_profile_path(const std::filesystem::path& spec_file,
                                                          const std::filesystem::path& env);

/// Parses the TOML profile at `path` into JSON (tables to objects, integers and floats kept
/// apart, dates and times as their TOML text). A syntax error is a diagnostic positioned in the
/// profile; `display_name` names the file in it. Files over 1 MiB are refused.
tl::expected<nlohmann::json, util::Diagnostic> load_profile(const std::filesystem::path& path,
                                                            const std::string& display_name);

/// How a path is shown in messages: relative to the working directory when under it.
std::string display_path(const std::filesystem::path& path);

}  // namespace expctl::spec
