#pragma once
/// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF),
/// the checksum of TensorBoard's TFRecord framing and of the decoded-dataset cache. x86-64
/// processors with SSE4.2 compute it with the crc32 instruction (checked at run time), about
/// twice as fast as zlib's CRC-32 here; elsewhere a 256-entry table does, byte by byte. Both
/// paths are tested against RFC 3720's vectors and against each other.

#include <cstdint>
#include <optional>
#include <string_view>

namespace expctl::util {

/// CRC-32C of `bytes`; pass an earlier result as `crc` to continue it over more bytes
/// (crc32c(a + b) == crc32c(b, crc32c(a))).
std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0);

namespace detail {
/// The table path, on any processor.
std::uint32_t crc32c_table(std::string_view bytes, std::uint32_t crc);
/// The SSE4.2 path; nullopt where the processor (or the build's target) has no crc32 instruction.
std::optional<std::uint32_t> crc32c_hardware(std::string_view bytes, std::uint32_t crc);
}  // namespace detail

}  // namespace expctl::util
