// The supervisor's clean-up of shared-memory segments a rank killed during start-up left behind.
#include <catch2/catch.hpp>

#include <fstream>

#include "expctl/launch/shm_segments.hpp"
#include "launch_test_helpers.hpp"

namespace expctl::launch {
namespace {

TEST_CASE("remove_shm_segments removes expctl-*-<pid> of the given pids and nothing else", "[launch][shm]") {
  test::TempDir dir;  // launch::test
  for (const char* name : {"expctl-run-h0-123", "expctl-run-h1-456", "expctl-run-h0-1234", "other-123", "expctl-123"}) {
    std::ofstream(dir / name) << "x";
  }
  CHECK(remove_shm_segments({123}, dir.path()) == 2);  // "expctl-123" ends in -123 too: ours by name
  CHECK_FALSE(std::filesystem::exists(dir.path() / "expctl-run-h0-123"));
  CHECK(std::filesystem::exists(dir.path() / "expctl-run-h1-456"));
  CHECK(std::filesystem::exists(dir.path() / "expctl-run-h0-1234"));  // another pid whose digits end the same
  CHECK(std::filesystem::exists(dir.path() / "other-123"));
  CHECK(remove_shm_segments({}, dir.path()) == 0);
  CHECK(remove_shm_segments({1}, dir.path() / "missing") == 0);
}

}  // namespace
}  // namespace expctl::launch
