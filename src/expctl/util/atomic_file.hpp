#pragma once
/// Files and directories that appear whole or not at all: a reader never sees a half-written
/// checkpoint, spec or report, even when the disk fills or the process is killed mid-write.

#include <filesystem>
#include <string_view>

#include "expctl/util/error.hpp"

namespace expctl::util {

/// Writes `content` to a temporary file beside `path`, fsyncs it, renames it over `path` and
/// fsyncs the directory. On failure (e.g. ENOSPC) the temporary is removed, `path` is untouched,
/// and the error names the file and the cause.
Expected<void> write_file_atomic(const std::filesystem::path& path, std::string_view content);

/// Reads a whole file; the error names the file.
Expected<std::string> read_file(const std::filesystem::path& path);

/// Renames the fully populated directory `staging` to `target` (which must not exist) and fsyncs
/// the parent: the directory appears complete or not at all.
Expected<void> publish_directory(const std::filesystem::path& staging, const std::filesystem::path& target);

}  // namespace expctl::util
