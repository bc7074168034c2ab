#pragma once
/// Pinned-stack profiles (envs/*.toml): the software stack an experiment expects. Each key
/// pins one fingerprint field with a VersionPattern; keys that are left out are not pinned.
/// The format is documented in docs/env.md; `profile_keys()` is its table.

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "expctl/env/version_pattern.hpp"

namespace expctl::env {

/// How a pin's actual value is compared with its pattern.
enum class PinComparison {
  pattern,       ///< VersionPattern::matches on the field's text
  image_digest,  ///< exact pins compare the sha256:<hex> parts of "name@sha256:<hex>"; others as pattern
};

/// One key a profile may set.
struct ProfileKey {
  std::string_view key;    ///< "libtorch.version"
  std::string_view field;  ///< fingerprint field it pins, "software.libtorch_version"
  PinComparison comparison;
  std::string_view doc;
};

/// Every pinnable key, in display order. `[env]` keys (any variable name) are not listed: they
/// pin the variable of that name in env.vars.
std::span<const ProfileKey> profile_keys();

/// One pinned value, with its position in the profile for messages.
struct Pin {
  std::string key;    ///< "libtorch.version", or "env.OMP_NUM_THREADS"
  std::string field;  ///< "software.libtorch_version", or "env.vars" for an [env] pin
  PinComparison comparison = PinComparison::pattern;
  VersionPattern pattern;
  int line = 0;
  int column = 0;
};

struct Profile {
  std::string file;  ///< as named in messages
  std::string description;
  std::vector<Pin> pins;  ///< in file order

  /// Names of the variables the [env] table pins (FingerprintOptions::extra_env_names).
  std::vector<std::string> env_names() const;
};

/// Parses profile text; every problem at once as util::DiagnosticError (exit 2): TOML syntax,
/// unknown keys (with "did you mean"), wrong types, bad patterns. `file` names it in messages.
Profile parse_profile(std::string_view text, const std::string& file);

/// Reads and parses `path`, named `display_name` in messages (default: the path as given);
/// an unreadable file is util::EnvError (exit 2).
Profile load_profile(const std::filesystem::path& path, const std::string& display_name = "");

}  // namespace expctl::env
