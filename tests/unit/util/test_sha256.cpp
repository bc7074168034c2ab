#include <catch2/catch.hpp>

#include "expctl/util/sha256.hpp"
#include "support/test_support.hpp"

using expctl::util::Sha256;
using expctl::util::sha256_hex;

TEST_CASE("sha256: known answers (FIPS 180-2 vectors)") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("sha256: incremental updates equal one update") {
  Sha256 hasher;
  hasher.update("ab").update("c");
  CHECK(hasher.hex_digest() == sha256_hex("abc"));
}

TEST_CASE("sha256: file digest equals digest of its bytes, and a missing file is an error naming it") {
  expctl::test::TempDir dir;
  const auto path = dir.write("data.bin", std::string(3'000'000, 'x'));
  const auto digest = expctl::util::sha256_file(path);
  REQUIRE(digest.has_value());
  CHECK(*digest == sha256_hex(std::string(3'000'000, 'x')));
  const auto missing = expctl::util::sha256_file(dir / "nope.bin");
  REQUIRE_FALSE(missing.has_value());
  CHECK_THAT(missing.error().message, Catch::Contains("nope.bin"));
}
