#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/util/error.hpp"
#include "expctl/util/sandbox.hpp"

namespace fs = std::filesystem;
namespace sandbox = expctl::util::sandbox;

namespace {

// What a sandboxed child could do, one bit each (the child exits with the bits).
enum : int {
  k_wrote_inside = 1,
  k_created_inside = 2,
  k_wrote_outside = 4,
  k_refused_outside_eacces = 8,
  k_wrote_dev_null = 16,
  k_read_outside = 32,
  k_restricted = 64,
  k_explained = 128,
};

bool can_write(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0600);
  if (fd < 0) {
    return false;
  }
  const bool wrote = ::write(fd, "x", 1) == 1;
  ::close(fd);
  return wrote;
}

/// Forks; the child restricts itself to `inside` and tries each thing; returns the child's bits.
int sandboxed_child(const fs::path& inside, const fs::path& outside) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int bits = 0;
    try {
      if (sandbox::restrict_writes({.folders = {inside}, .files = {}, .described = "the test's folder"},
                                   sandbox::Mode::require)) {
        bits |= k_restricted;
      }
    } catch (...) {
      ::_exit(0);  // nothing set: every check fails
    }
    bits |= can_write(inside / "existing", O_APPEND) ? k_wrote_inside : 0;
    bits |= can_write(inside / "new", O_CREAT | O_EXCL) ? k_created_inside : 0;
    if (can_write(outside, O_APPEND)) {
      bits |= k_wrote_outside;
    } else if (errno == EACCES) {
      bits |= k_refused_outside_eacces;
    }
    bits |= can_write("/dev/null", O_TRUNC) ? k_wrote_dev_null : 0;
    const int fd = ::open(outside.c_str(), O_RDONLY | O_CLOEXEC);
    bits |= fd >= 0 ? k_read_outside : 0;
    const std::string explained = sandbox::explain_refusal("the model", "cannot open x: Permission denied");
    bits |= explained.starts_with(
                "the model tried to write outside the test's folder; expctl's sandbox (Landlock) "
                "refused it") &&
                    explained.ends_with(": cannot open x: Permission denied")
                ? k_explained
                : 0;
    ::_exit(bits);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

struct AbiCap {
  explicit AbiCap(const char* value) { ::setenv("EXPCTL_LANDLOCK_ABI_MAX", value, 1); }
  ~AbiCap() { ::unsetenv("EXPCTL_LANDLOCK_ABI_MAX"); }
};

}  // namespace

TEST_CASE(
    "sandbox: a restricted process writes its folder and /dev/null, reads anything, and its write "
    "elsewhere is refused with EACCES") {
  if (sandbox::landlock_abi() == 0) {
    expctl::test::skip("landlock", sandbox::describe_availability());
    return;
  }
  expctl::test::TempDir dir;
  const auto inside = dir / "inside";
  fs::create_directories(inside);
  std::ofstream(inside / "existing") << "a";
  const auto outside = dir.write("outside.txt", "user data");

  const int bits = sandboxed_child(inside, outside);
  CHECK((bits & k_restricted) != 0);
  CHECK((bits & k_wrote_inside) != 0);
  CHECK((bits & k_created_inside) != 0);
  CHECK((bits & k_wrote_outside) == 0);
  CHECK((bits & k_refused_outside_eacces) != 0);
  CHECK((bits & k_wrote_dev_null) != 0);
  CHECK((bits & k_read_outside) != 0);
  CHECK((bits & k_explained) != 0);
  std::ifstream in(outside);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "user data");
}

TEST_CASE("sandbox: on an older Landlock ABI the rights it lacks are not asked for, and the sandbox still holds") {
  if (sandbox::landlock_abi() == 0) {
    expctl::test::skip("landlock", sandbox::describe_availability());
    return;
  }
  expctl::test::TempDir dir;
  fs::create_directories(dir / "inside");
  std::ofstream(dir / "inside" / "existing") << "a";
  const auto outside = dir.write("outside.txt", "user data");
  for (const char* abi : {"1", "2", "3"}) {
    AbiCap cap(abi);
    INFO("ABI " << abi);
    fs::remove(dir / "inside" / "new");
    const int bits = sandboxed_child(dir / "inside", outside);
    CHECK((bits & k_restricted) != 0);
    CHECK((bits & (k_wrote_inside | k_created_inside | k_wrote_dev_null)) ==
          (k_wrote_inside | k_created_inside | k_wrote_dev_null));
    CHECK((bits & k_wrote_outside) == 0);
  }
}

TEST_CASE("sandbox: without Landlock, auto runs unrestricted, require refuses in one line, off never restricts") {
  expctl::test::TempDir dir;
  AbiCap cap("0");
  CHECK(sandbox::landlock_abi() == 0);
  CHECK_THAT(sandbox::describe_availability(), Catch::Contains("Landlock"));
  CHECK_FALSE(sandbox::restrict_writes({.folders = {dir.path()}, .files = {}}, sandbox::Mode::automatic));
  CHECK_FALSE(sandbox::restrict_writes({.folders = {dir.path()}, .files = {}}, sandbox::Mode::off));
  try {
    (void)sandbox::restrict_writes({.folders = {dir.path()}, .files = {}}, sandbox::Mode::require);
    FAIL("require ran without Landlock");
  } catch (const expctl::util::UsageError& error) {
    const std::string what = error.what();
    CHECK_THAT(what, Catch::StartsWith("--sandbox=require: "));
    CHECK(what.find('\n') == std::string::npos);
  }
  CHECK_FALSE(sandbox::restricted());
}

TEST_CASE("sandbox: modes parse from their names, and a bad EXPCTL_SANDBOX is refused naming the choices") {
  CHECK(sandbox::parse_mode("auto") == sandbox::Mode::automatic);
  CHECK(sandbox::parse_mode("require") == sandbox::Mode::require);
  CHECK(sandbox::parse_mode("off") == sandbox::Mode::off);
  CHECK_FALSE(sandbox::parse_mode("on").has_value());
  for (const auto mode : {sandbox::Mode::automatic, sandbox::Mode::require, sandbox::Mode::off}) {
    CHECK(sandbox::parse_mode(sandbox::mode_name(mode)) == mode);
  }
  ::setenv(sandbox::k_mode_variable, "yes", 1);
  CHECK_THROWS_WITH(sandbox::mode_from_environment(), Catch::Contains("auto, require or off"));
  ::unsetenv(sandbox::k_mode_variable);
  CHECK(sandbox::mode_from_environment() == sandbox::Mode::automatic);
}

TEST_CASE("sandbox: a refused write is explained naming the sandbox only in a restricted process") {
  // This process is not restricted: the message stays as it was.
  CHECK(sandbox::explain_refusal("the model", "open: Permission denied") == "open: Permission denied");
}
