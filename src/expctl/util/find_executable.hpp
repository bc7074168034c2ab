#pragma once
/// The PATH search a shell does for a command name without a '/'.

#include <filesystem>
#include <optional>
#include <string>

namespace expctl::util {

/// The first `dir/name` that is an executable regular file, for each `dir` of the colon-separated
/// `path` (an empty entry is the current folder); nullopt when none is.
std::optional<std::filesystem::path> find_executable(const std::string& name, const std::string& path);

}  // namespace expctl::util
