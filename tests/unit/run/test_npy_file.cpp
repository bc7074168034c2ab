// The .npy header parser and the mapping (train/npy_file.hpp): torch-free, so tested here.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "expctl/train/npy_file.hpp"
#include "support/test_support.hpp"

using namespace expctl;
using train::NpyDtype;

namespace {

/// A .npy file as NumPy writes it: magic, version, header length, the dictionary padded with
/// spaces and a newline to a multiple of 64, then `payload`.
std::string npy(const std::string& dictionary, const std::string& payload, int major = 1) {
  std::string header = dictionary;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) {
    header += ' ';
  }
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  const auto length = static_cast<std::uint32_t>(header.size());
  for (std::size_t i = 0; i < (major == 1 ? 2U : 4U); ++i) {
    bytes += static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  return bytes + header + payload;
}

util::Expected<train::NpyHeader> parse(const std::string& bytes) {
  return train::parse_npy_header({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()}, bytes.size());
}

std::string error_of(const std::string& bytes) {
  const auto parsed = parse(bytes);
  REQUIRE_FALSE(parsed.has_value());
  return parsed.error().message;
}

}  // namespace

TEST_CASE("npy: NumPy's headers of versions 1 to 3, every supported dtype and shape") {
  const auto header = parse(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", std::string(48, 'x')));
  REQUIRE(header.has_value());
  CHECK(header->dtype == NpyDtype::float32);
  CHECK(header->shape == std::vector<std::int64_t>{3, 4});
  CHECK(header->data_offset == 128);  // 10 bytes of prefix + 60 of dictionary, padded to 64s
  CHECK(header->elements() == 12);
  CHECK(parse(npy("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", "abcde"))->shape ==
        std::vector<std::int64_t>{5});
  CHECK(parse(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", std::string(8, 'x')))->shape.empty());
  CHECK(parse(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 1, 2), }", std::string(8, 'x'), 2))->dtype ==
        NpyDtype::float16);
  CHECK(parse(npy("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (1,)}", "abcd", 3))->dtype ==
        NpyDtype::int32);
  // uint16: packed token ids (issue 51), two bytes each.
  const auto tokens = parse(npy("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", std::string(12, 'x')));
  REQUIRE(tokens.has_value());
  CHECK(tokens->dtype == NpyDtype::uint16);
  CHECK(npy_item_size(NpyDtype::uint16) == 2);
  CHECK(std::string(npy_descr(NpyDtype::uint16)) == "<u2");
  CHECK_THAT(error_of(npy("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", std::string(11, 'x'))),
             Catch::Contains("truncated: its header promises a <u2 array of shape (2, 3) but the file has 11 bytes"));
}

TEST_CASE("npy: what NumPy can write but expctl cannot read is named with the fix") {
  CHECK_THAT(error_of("PK\x03\x04 not numpy"), Catch::Contains("not a NumPy .npy file"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", std::string(48, 'x'))),
             Catch::Contains("Fortran-ordered: save np.ascontiguousarray(arr)"));
  CHECK_THAT(error_of(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", std::string(12, 'x'))),
             Catch::Contains("big-endian"));
  CHECK_THAT(error_of(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", std::string(24, 'x'))),
             Catch::Contains("dtype <c8 is not supported"));
  CHECK_THAT(error_of(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", "")),
             Catch::Contains("structured"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", std::string(47, 'x'))),
             Catch::Contains("truncated: its header promises a <f4 array of shape (3, 4) but the file has 47 bytes"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'shape': (3, 4), }", "")), Catch::Contains("lacks"));
  CHECK_THAT(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")),
             Catch::Contains("shape"));
  // Sizes whose product overflows 64 bits are refused by comparing with the file, not wrapped.
  CHECK_THAT(error_of(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", "")),
             Catch::Contains("truncated"));
  const std::string whole = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", "");
  CHECK_THAT(error_of(whole.substr(0, 30)), Catch::Contains("truncated .npy header"));
}

TEST_CASE("npy: a mapped file's elements are the bytes after its header, errors name the file") {
  test::TempDir dir;
  float values[3] = {1.5F, -2.0F, 3.25F};
  const auto path =
      dir.write("a.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                             std::string(reinterpret_cast<const char*>(values), sizeof(values))));
  const auto array = train::map_npy(path);
  float read[3] = {};
  std::memcpy(read, array.data(), sizeof(read));
  CHECK(read[0] == 1.5F);
  CHECK(read[2] == 3.25F);
  CHECK_THROWS_WITH(train::map_npy(dir / "missing.npy"), Catch::Contains("missing.npy: cannot open"));
  const auto empty = dir.write("empty.npy", "");
  CHECK_THROWS_WITH(train::map_npy(empty), Catch::Contains("empty.npy: empty file"));
  const auto text = dir.write("text.npy", "hello, world");
  CHECK_THROWS_WITH(train::map_npy(text), Catch::Contains("text.npy: not a NumPy .npy file"));
}
