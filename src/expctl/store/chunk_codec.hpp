#pragma once
/// A sealed chunk of one series (run, metric, rank): up to k_chunk_points points, steps ascending,
/// encoded Gorilla-style (Pelkonen et al., VLDB 2015) into one bit stream, byte-shuffled and
/// deflated (zlib), or as bit-packed decimals (ALP, Afroozeh et al., SIGMOD 2023), whichever is
/// smallest. The same bytes are
/// stored by every backend (docs/store.md, "Series as chunks"); nothing here touches a database.
///
/// Values are kept as their 64-bit patterns, so a NaN's payload, ±Inf and -0.0 round-trip bit for
/// bit. decode() checks every length and bound against the bytes it is given and throws
/// util::StoreError for anything it did not write (a damaged row, a file edited by hand).

#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::store::chunk {

/// The first byte of every chunk: the format its bytes follow. 1: Gorilla (delta-of-delta steps,
/// XORed values, one bit stream); 2: varint step deltas and byte-shuffled values through zlib;
/// 3: decimals (ALP): values as integers n with v == n / 10^e, bit-packed, other values raw.
/// encode() writes whichever is smallest for the chunk.
inline constexpr std::uint8_t k_format_xor = 1;
inline constexpr std::uint8_t k_format_shuffled = 2;
inline constexpr std::uint8_t k_format_decimal = 3;
/// How many points a chunk is sealed with (the last chunk of a run may hold fewer).
inline constexpr std::int64_t k_chunk_points = 4096;
/// The most points decode() accepts in one chunk (a bound for damaged bytes, above k_chunk_points).
inline constexpr std::int64_t k_max_points = 1 << 20;

/// A value's bit pattern, and back.
inline std::uint64_t bits_of(double value) {
  return std::bit_cast<std::uint64_t>(value);
}
inline double value_of(std::uint64_t bits) {
  return std::bit_cast<double>(bits);
}

/// What a chunk row carries beside its bytes, so that listings, summaries and coarse charts read
/// no point. min, max and sum are over the values that are not NaN (0 when all are NaN).
struct Header {
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
  std::int64_t count = 0;
  std::int64_t nan_count = 0;
  double min = 0.0;
  double max = 0.0;
  double sum = 0.0;
  std::uint64_t first_bits = 0;
  std::uint64_t last_bits = 0;
};

/// The header of a series' points (steps ascending, at least one point).
Header summarize(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits);

/// The chunk bytes of `steps` (strictly ascending, at least one) and their values' bit patterns.
std::string encode(std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits);

/// The chunk bytes of `steps` and `bits` in one format (k_format_xor, k_format_shuffled or
/// k_format_decimal); empty where k_format_decimal does not apply (most values are no short
/// decimal). For measuring and testing the formats one by one: the store writes encode().
std::string encode_as(std::uint8_t format, std::span<const std::int64_t> steps, std::span<const std::uint64_t> bits);

/// Appends the points of `bytes` to `steps` and `bits`. Throws util::StoreError naming the fault
/// when the bytes are not a chunk this expctl writes.
void decode(std::string_view bytes, std::vector<std::int64_t>& steps, std::vector<std::uint64_t>& bits);

}  // namespace expctl::store::chunk
