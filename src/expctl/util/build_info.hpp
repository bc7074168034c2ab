#pragma once
/// What this binary is: filled in at build time by cmake/WriteBuildInfo.cmake.

namespace expctl::util {

struct BuildInfo {
  const char* version;        ///< expctl's semantic version
  const char* git_commit;     ///< short commit, "-dirty" suffix for uncommitted changes, or "unknown"
  const char* torch_version;  ///< LibTorch version built against, or "none"
  const char* compiler;       ///< e.g. "GNU-12.2.0"
  const char* build_type;     ///< CMAKE_BUILD_TYPE
};

const BuildInfo& build_info();

}  // namespace expctl::util
