#pragma once
/// Shared by every fuzz target (fuzz/targets/*.cpp): a private scratch folder for the inputs a
/// product entry point reads from a file, and the rule for what counts as a finding.
///
/// A target is built twice from the same source: with clang's libFuzzer (the `fuzz` preset), and
/// with any compiler as a plain replay program (replay_main.cpp) that the normal test suite runs
/// over fuzz/corpus/<target>/ and fuzz/regressions/<target>/.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

#include "expctl/util/error.hpp"

namespace expctl::fuzz {

/// A folder of this process only (under /dev/shm when it exists: files are written every
/// execution), removed when the process exits normally.
inline const std::filesystem::path& scratch() {
  // Never destroyed: the atexit handler below runs after the destructors of statics constructed
  // after its registration, this one included, and removed nothing (a folder per run was left).
  static const std::filesystem::path& folder = *new std::filesystem::path([] {
    std::error_code error;
    const std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm", error) ? std::filesystem::path("/dev/shm")
                                                        : std::filesystem::temp_directory_path();
    std::string pattern = (base / "expctl-fuzz-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::abort();
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch(), ignored);
    });
    return std::filesystem::path(pattern);
  }());
  return folder;
}

/// Writes `bytes` to `path` (replacing it); aborts when it cannot (a broken harness, not a finding).
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::abort();
  }
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Calls `line(text)` for each line of `text` (without its '\n'), until it returns false.
template <class Line>
void for_each_line(std::string_view text, Line&& line) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    const bool more = line(text.substr(0, end));
    if (!more || end == std::string_view::npos) {
      return;
    }
    text.remove_prefix(end + 1);
  }
}

/// Runs `body`: an error the product reports to the user (util::Failure: one clear line, a
/// documented exit code) is the expected answer to bad input; an InternalError (a broken
/// invariant) or any other exception escapes, and libFuzzer reports it as a crash.
template <class Body>
void expect_only_user_errors(Body&& body) {
  try {
    body();
  } catch (const util::InternalError&) {
    throw;
  } catch (const util::Failure&) {
  }
}

}  // namespace expctl::fuzz
