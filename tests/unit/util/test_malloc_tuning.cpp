// The training malloc settings: applied by default, and a user's own choice always wins.
#include <cstdlib>
#include <optional>
#include <string>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>
#include <malloc.h>

#include "expctl/util/malloc_tuning.hpp"

namespace {

/// Sets (or, with nullopt, unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : m_name(name) {
    if (const char* old = std::getenv(name)) {
      m_old = old;
    }
    value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { m_old ? ::setenv(m_name, m_old->c_str(), 1) : ::unsetenv(m_name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

}  // namespace

TEST_CASE("malloc tuning: a user's GLIBC_TUNABLES or EXPCTL_MALLOC_TUNING=off is left alone", "[util]") {
  {
    ScopedEnv off("EXPCTL_MALLOC_TUNING", "off");
    CHECK(expctl::util::tune_malloc_for_training() == "malloc: glibc defaults (EXPCTL_MALLOC_TUNING=off)");
  }
  ScopedEnv on("EXPCTL_MALLOC_TUNING", std::nullopt);
  ScopedEnv tunables("GLIBC_TUNABLES", "glibc.malloc.arena_max=2");
  CHECK(expctl::util::tune_malloc_for_training() == "malloc: as GLIBC_TUNABLES sets it");
}

TEST_CASE("malloc tuning: once applied, a 24 MiB block comes from the heap, not its own mmap", "[util]") {
  ScopedEnv on("EXPCTL_MALLOC_TUNING", std::nullopt);
  ScopedEnv tunables("GLIBC_TUNABLES", std::nullopt);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer replaces glibc's malloc, and its mallopt() refuses every setting: the
  // product says so ("glibc refused ...; defaults kept") and there is no glibc heap to look at.
  CHECK(expctl::util::tune_malloc_for_training() == "malloc: glibc refused the training thresholds; defaults kept");
  expctl::test::skip("glibc-malloc", "under AddressSanitizer malloc is not glibc's (the asan preset)");
  return;
#endif
  CHECK(expctl::util::tune_malloc_for_training() ==
        "malloc: blocks up to 32 MiB from the heap, up to 512 MiB kept after free");
  const auto mapped_before = ::mallinfo2().hblks;
  // volatile: the compiler may otherwise drop a malloc/free pair it can see through.
  char* volatile block = static_cast<char*>(std::malloc(24UL * 1024 * 1024));
  REQUIRE(block != nullptr);
  block[0] = 1;
  const auto mapped_during = ::mallinfo2().hblks;
  std::free(block);
  // With glibc's defaults (threshold 128 KiB, rising only after big frees) this block is mmapped.
  CHECK(mapped_during == mapped_before);
}
