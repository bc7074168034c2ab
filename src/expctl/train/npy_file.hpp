#pragma once
/// NumPy `.npy` arrays, mapped read-only: the ranks of a host share the page cache's one copy of
/// the data instead of each reading it into memory of its own (a 1 GiB training set costs each
/// rank nothing but page tables). The header parser is a pure function over bytes, fuzzed with the
/// other parsers (issue 39). Format: numpy.lib.format, versions 1.0, 2.0 and 3.0.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "expctl/train/decoded_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {

/// The element types expctl trains on (little-endian; `|u1` has no byte order).
enum class NpyDtype { float32, float16, float64, uint8, int32, int64, uint16 };

/// NumPy's spelling ("<f4", "|u1", ...).
const char* npy_descr(NpyDtype dtype);
/// Bytes per element.
std::size_t npy_item_size(NpyDtype dtype);

struct NpyHeader {
  NpyDtype dtype = NpyDtype::float32;
  std::vector<std::int64_t> shape;  ///< empty for a 0-d array
  std::size_t data_offset = 0;      ///< where the elements start
  std::int64_t elements() const;
};

/// Parses the header at the start of `bytes` (the whole file, or at least its header) of a file of
/// `file_size` bytes. Errors say what is wrong and how to fix it: not a .npy file, a Fortran-ordered
/// or big-endian array, an unsupported dtype (names it), a truncated file (the sizes).
util::Expected<NpyHeader> parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size);

/// A mapped array: its header and every byte of the file (the elements start at data_offset).
struct NpyArray {
  NpyHeader header;
  SharedBytes bytes;
  const std::uint8_t* data() const { return bytes.data() + header.data_offset; }
};

/// Maps `path` read-only and parses its header; throws TrainError starting with the path when it
/// cannot be opened or is not an array expctl can read.
NpyArray map_npy(const std::filesystem::path& path);

/// Maps the whole of `path` read-only (a raw token stream, data.dataset tokens); throws TrainError
/// starting with the path when it cannot be opened, is empty ("empty file, not `what`") or mapped.
SharedBytes map_file(const std::filesystem::path& path, const char* what);

}  // namespace expctl::train
