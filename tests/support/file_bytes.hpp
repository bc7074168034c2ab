#pragma once
// A file's bytes, for tests that compare decoded images or feed raw files to a decoder.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace expctl::test {

/// Every byte of `file` (empty when it cannot be read).
inline std::vector<std::uint8_t> bytes_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace expctl::test
