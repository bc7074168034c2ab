#include <csignal>
#include <filesystem>

#include <sys/resource.h>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/util/atomic_file.hpp"

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

  // A file that exists keeps its old content when the new one cannot be written whole: a file
  // size limit (RLIMIT_FSIZE, which binds root too) makes the write fail with EFBIG halfway.
  const auto target = dir.write("kept/x.txt", "old content");
  {
    rlimit before{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &before) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    rlimit small = before;
    small.rlim_cur = 4;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    const auto refused = write_file_atomic(target, "new content, longer than four bytes");
    ::setrlimit(RLIMIT_FSIZE, &before);
    std::signal(SIGXFSZ, old_handler);
    REQUIRE_FALSE(refused.has_value());
    CHECK_THAT(refused.error().message, Catch::Contains("kept/x.txt"));
  }
  CHECK(read_file(target).value() == "old content");
  // Nothing of the failed write is left beside it (no temporary file).
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "kept")) {
    ++entries;
  }
  CHECK(entries == 1);
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
