// CRC-32C: RFC 3720's test vectors (B.4) on every path, and the hardware path against the table.
#include <numeric>
#include <random>
#include <string>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/util/crc32c.hpp"

using namespace expctl::util;

namespace {

struct Vector {
  const char* name;
  std::string bytes;
  std::uint32_t crc;
};

std::vector<Vector> rfc3720_vectors() {
  std::string ascending(32, '\0');
  std::iota(ascending.begin(), ascending.end(), '\0');
  return {{"32 bytes of zeros", std::string(32, '\0'), 0x8A9136AAu},
          {"32 bytes of 0xFF", std::string(32, '\xFF'), 0x62A8AB43u},
          {"bytes 0..31 ascending", ascending, 0x46DD794Eu},
          {"bytes 31..0 descending", std::string(ascending.rbegin(), ascending.rend()), 0x113FDB5Cu},
          {"\"123456789\" (the CRC catalogue's check value)", "123456789", 0xE3069283u},
          {"no bytes", "", 0u}};
}

std::string random_bytes(std::mt19937& random, std::size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) {
    c = static_cast<char>(random() & 0xFFu);
  }
  return bytes;
}

}  // namespace

TEST_CASE("util: crc32c gives RFC 3720's values on the table path") {
  for (const Vector& vector : rfc3720_vectors()) {
    CAPTURE(vector.name);
    CHECK(crc32c(vector.bytes) == vector.crc);
    CHECK(detail::crc32c_table(vector.bytes, 0) == vector.crc);
  }
}

TEST_CASE("util: crc32c gives RFC 3720's values on the hardware path") {
  if (!detail::crc32c_hardware("", 0)) {
    expctl::test::skip("sse4.2", "this processor has no SSE4.2 crc32 instruction: there is no hardware path");
    return;
  }
  for (const Vector& vector : rfc3720_vectors()) {
    CAPTURE(vector.name);
    const auto hardware = detail::crc32c_hardware(vector.bytes, 0);
    REQUIRE(hardware.has_value());
    CHECK(*hardware == vector.crc);
  }
}

TEST_CASE("util: crc32c continues over split input and the paths agree on every length and alignment") {
  std::mt19937 random(20260301);
  for (std::size_t size = 0; size < 300; ++size) {
    const std::string bytes = random_bytes(random, size + 7);
    const std::string_view data = std::string_view(bytes).substr(size % 7, size);  // every alignment
    CAPTURE(size);
    const std::uint32_t whole = detail::crc32c_table(data, 0);
    if (const auto hardware = detail::crc32c_hardware(data, 0)) {
      REQUIRE(*hardware == whole);
    }
    const std::size_t cut = size / 3;
    REQUIRE(crc32c(data.substr(cut), crc32c(data.substr(0, cut))) == whole);
    REQUIRE(detail::crc32c_table(data.substr(cut), detail::crc32c_table(data.substr(0, cut), 0)) == whole);
  }
  // Without the hardware path there was one path to agree with: said after the rest has run.
  if (!detail::crc32c_hardware("", 0)) {
    expctl::test::skip("sse4.2", "this processor has no SSE4.2 crc32 instruction: the paths were not compared");
  }
}
