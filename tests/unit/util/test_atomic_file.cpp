#include <catch2/catch.hpp>

#include <filesystem>

#include "expctl/util/atomic_file.hpp"
#include "support/test_support.hpp"

namespace fs = std::filesystem;
using namespace expctl::util;

TEST_CASE("atomic_file: writes, replaces and leaves no temporaries") {
  expctl::test::TempDir dir;
  const fs::path target = dir / "out.txt";
  REQUIRE(write_file_atomic(target, "one").has_value());
  REQUIRE(write_file_atomic(target, "two").has_value());
  CHECK(read_file(target).value() == "two");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("atomic_file: failure names the file and keeps the old content") {
  expctl::test::TempDir dir;
  const auto result = write_file_atomic(dir / "missing-dir" / "x.txt", "data");
  REQUIRE_FALSE(result.has_value());
  CHECK_THAT(result.error().message, Catch::Contains("missing-dir/x.txt"));
}


TEST_CASE("atomic_file: publish_directory refuses to overwrite") {
  expctl::test::TempDir dir;
  fs::create_directory(dir / "staging");
  dir.write("staging/f", "x");
  REQUIRE(publish_directory(dir / "staging", dir / "final").has_value());
  CHECK(fs::exists(dir / "final" / "f"));
  fs::create_directory(dir / "staging2");
  const auto again = publish_directory(dir / "staging2", dir / "final");
  REQUIRE_FALSE(again.has_value());
  CHECK_THAT(again.error().message, Catch::Contains("already exists"));
}
