#pragma once
/// Content digests of the files that change results (dataset files, model files, a program's
/// scripts), remembered across runs so that an unchanged 1 GiB file is read once, not per run.

#include <filesystem>
#include <string>

#include "expctl/util/error.hpp"

namespace expctl::util {

/// SHA-256 (64 lowercase hex) of the file's bytes. The result is remembered in the cache directory
/// (util::cache_directory(), "digests/") under the file's absolute path, size, modification time
/// (ns), inode change time (ns: an in-place edit whose mtime was put back still changes it),
/// device and inode, as ccache's direct mode names a result; a file modified in the last two
/// seconds is hashed but not remembered, since a second write within the clock's granularity would
/// keep that identity. An entry is used only when it holds a well-formed digest. The error names
/// the file when it cannot be read; a cache that cannot be written never fails the digest.
Expected<std::string> file_digest(const std::filesystem::path& path);

/// SHA-256 (64 lowercase hex) of a folder's content: every regular file under it (recursively,
/// symbolic links to files followed, to folders not), by its '/'-separated path relative to
/// `folder`, its size and its file_digest, in path order; so a file added, removed, renamed or
/// edited changes it, and the folder's own location does not. The error names what cannot be read.
Expected<std::string> folder_digest(const std::filesystem::path& folder);

}  // namespace expctl::util
