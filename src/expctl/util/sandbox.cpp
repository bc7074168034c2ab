#include "expctl/util/sandbox.hpp"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>
#include <linux/landlock.h>

#include "expctl/util/error.hpp"

// Debian 12's header stops at ABI 2; the rights of later ABIs are used only where the kernel has them.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

namespace expctl::util::sandbox {
namespace fs = std::filesystem;
namespace {

std::atomic<bool> g_restricted{false};
std::string g_described;  // written once, before g_restricted is set

// Every right that creates, changes or removes something (ABI 1), the right to move a file
// between folders (ABI 2) and to truncate one (ABI 3). Reads, execution, device ioctls (ABI 5),
// the network (ABI 4) and scopes (ABI 6) are not handled: they stay open.
std::uint64_t handled_rights(int abi) {
  std::uint64_t rights = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                         LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                         LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                         LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) {
    rights |= LANDLOCK_ACCESS_FS_REFER;
  }
  if (abi >= 3) {
    rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  }
  return rights;
}

// The rights a rule on a single file may carry (the kernel refuses folder rights there).
std::uint64_t file_rights(int abi) {
  return LANDLOCK_ACCESS_FS_WRITE_FILE | (abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0);
}

int kernel_abi() {
  const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

// The character devices a process writes without thinking of them as files (/dev/null, /dev/tty,
// /dev/nvidia*, /dev/dri/*): the sandbox keeps user files safe, not these.
std::vector<fs::path> character_devices() {
  std::vector<fs::path> devices;
  for (const char* folder : {"/dev", "/dev/dri", "/dev/nvidia-caps"}) {
    std::error_code error;
    for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
      struct stat info {};
      if (::lstat(it->path().c_str(), &info) == 0 && S_ISCHR(info.st_mode)) {
        devices.push_back(it->path());
      }
    }
  }
  return devices;
}

void add_rule(int ruleset, const fs::path& path, std::uint64_t rights, bool skip_missing) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) {
    if (skip_missing) {
      return;
    }
    throw UsageError(fmt::format("the sandbox cannot open {}, a path the sandboxed process may write: {}",
                                 path.string(), std::strerror(errno)));
  }
  landlock_path_beneath_attr rule{};
  rule.allowed_access = rights;
  rule.parent_fd = fd;
  const long added = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
  const int error = errno;
  ::close(fd);
  if (added != 0 && !skip_missing) {
    throw InternalError(fmt::format("Landlock refused a rule for {}: {}", path.string(), std::strerror(error)));
  }
}

}  // namespace

std::optional<Mode> parse_mode(std::string_view text) {
  if (text == "auto") {
    return Mode::automatic;
  }
  if (text == "require") {
    return Mode::require;
  }
  if (text == "off") {
    return Mode::off;
  }
  return std::nullopt;
}

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::automatic:
      return "auto";
    case Mode::require:
      return "require";
    case Mode::off:
      return "off";
  }
  return "auto";
}

Mode mode_from_environment() {
  const char* text = std::getenv(k_mode_variable);
  if (text == nullptr || *text == '\0') {
    return Mode::automatic;
  }
  const auto mode = parse_mode(text);
  if (!mode) {
    throw UsageError(fmt::format("{}={} is not a sandbox mode: use auto, require or off", k_mode_variable, text));
  }
  return *mode;
}

int landlock_abi() {
  static const int kernel = kernel_abi();
  if (const char* cap = std::getenv("EXPCTL_LANDLOCK_ABI_MAX"); cap != nullptr && *cap != '\0') {
    return std::min(kernel, std::atoi(cap));
  }
  return kernel;
}

std::string describe_availability() {
  if (const int abi = landlock_abi(); abi > 0) {
    return fmt::format("landlock ABI {}", abi);
  }
  return kernel_abi() > 0 ? "Landlock is turned off by EXPCTL_LANDLOCK_ABI_MAX=0"
                          : "this kernel has no Landlock (Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK and "
                            "landlock in the lsm= boot list)";
}

Ruleset::Ruleset(const Writable& writable) {
  const int abi = landlock_abi();
  EXPCTL_ASSERT(abi > 0, "a sandbox ruleset needs Landlock");
  landlock_ruleset_attr attributes{};
  attributes.handled_access_fs = handled_rights(abi);
  const long fd = ::syscall(SYS_landlock_create_ruleset, &attributes, sizeof attributes, 0);
  if (fd < 0) {
    throw InternalError(fmt::format("Landlock refused a ruleset (ABI {}): {}", abi, std::strerror(errno)));
  }
  m_fd = static_cast<int>(fd);
  try {
    for (const fs::path& folder : writable.folders) {
      std::error_code ignored;
      fs::create_directories(folder, ignored);
      add_rule(m_fd, folder, handled_rights(abi), false);
    }
    for (const fs::path& file : writable.files) {
      add_rule(m_fd, file, file_rights(abi), false);
    }
    for (const fs::path& device : character_devices()) {
      add_rule(m_fd, device, file_rights(abi), true);
    }
  } catch (...) {
    ::close(m_fd);
    throw;
  }
}

Ruleset::~Ruleset() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

int Ruleset::enforce(int ruleset_fd) noexcept {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return errno;
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset_fd, 0) != 0) {
    return errno;
  }
  return 0;
}

bool restrict_writes(const Writable& writable, Mode mode) {
  if (mode == Mode::off) {
    return false;
  }
  if (landlock_abi() == 0) {
    EXPCTL_CHECK(mode != Mode::require, UsageError,
                 "--sandbox=require: {}; run where the kernel has Landlock, or pass --sandbox=auto to run unsandboxed",
                 describe_availability());
    return false;
  }
  const Ruleset ruleset(writable);
  if (const int error = Ruleset::enforce(ruleset.fd()); error != 0) {
    throw InternalError(fmt::format("Landlock refused to restrict this process: {}", std::strerror(error)));
  }
  if (!g_restricted.load()) {
    g_described = writable.described;
  }
  g_restricted = true;
  return true;
}

bool restricted() {
  return g_restricted.load();
}

std::string explain_refusal(std::string_view who, const std::string& message) {
  if (!restricted() || message.find(std::strerror(EACCES)) == std::string::npos) {
    return message;
  }
  return fmt::format(
      "{} tried to write outside {}; expctl's sandbox (Landlock) refused it (docs/models.md#the-sandbox): {}", who,
      g_described, message);
}

}  // namespace expctl::util::sandbox
