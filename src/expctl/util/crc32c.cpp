#include "expctl/util/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define EXPCTL_CRC32C_SSE42 1
#endif

namespace expctl::util {
namespace {

constexpr std::uint32_t k_polynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) != 0 ? k_polynomial : 0u);
    }
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> k_table = make_table();

#ifdef EXPCTL_CRC32C_SSE42
__attribute__((target("sse4.2"))) std::uint32_t sse42_update(std::string_view bytes, std::uint32_t state) {
  const char* data = bytes.data();
  std::size_t size = bytes.size();
  std::uint64_t wide = state;
  for (; size >= 8; data += 8, size -= 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, data, 8);  // unaligned load; x86-64 is little-endian, as the CRC wants
    wide = _mm_crc32_u64(wide, word);
  }
  auto narrow = static_cast<std::uint32_t>(wide);
  for (; size > 0; ++data, --size) {
    narrow = _mm_crc32_u8(narrow, static_cast<unsigned char>(*data));
  }
  return narrow;
}

bool has_sse42() {
  static const bool supported = __builtin_cpu_supports("sse4.2") != 0;
  return supported;
}
#endif

}  // namespace

namespace detail {

std::uint32_t crc32c_table(std::string_view bytes, std::uint32_t crc) {
  std::uint32_t state = ~crc;
  for (const char c : bytes) {
    state = (state >> 8) ^ k_table[(state ^ static_cast<unsigned char>(c)) & 0xFFu];
  }
  return ~state;
}

std::optional<std::uint32_t> crc32c_hardware([[maybe_unused]] std::string_view bytes,
                                             [[maybe_unused]] std::uint32_t crc) {
#ifdef EXPCTL_CRC32C_SSE42
  if (has_sse42()) {
    return ~sse42_update(bytes, ~crc);
  }
#endif
  return std::nullopt;
}

}  // namespace detail

std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc) {
  if (const auto hardware = detail::crc32c_hardware(bytes, crc)) {
    return *hardware;
  }
  return detail::crc32c_table(bytes, crc);
}

}  // namespace expctl::util
