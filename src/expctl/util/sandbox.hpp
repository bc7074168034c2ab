#pragma once
/// A file-system sandbox for code expctl did not write (a TorchScript model, a program run with
/// `program.sandbox: true`): Landlock (man 7 landlock) limits where the process may WRITE, and
/// nothing else: reads, execution and the network stay open. docs/models.md#the-sandbox says what
/// it covers.
///
/// The restriction applies to the calling thread and to every thread and process it starts
/// afterwards; it cannot be lifted. Threads started before keep their freedom (Landlock has no
/// process-wide switch on the kernels Debian 12 runs), so it is applied before the foreign code
/// is loaded, in the thread that loads it.
///
/// Which rights a ruleset handles depends on the kernel's Landlock ABI, probed at run time:
/// Debian 12's <linux/landlock.h> names fewer rights than newer kernels know, and a right the
/// kernel does not know makes the ruleset invalid.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::util::sandbox {

/// `--sandbox` (and $EXPCTL_SANDBOX, which ranks inherit): automatic sandboxes where the kernel
/// has Landlock and says once where it has not; require refuses to run without it; off never sandboxes.
enum class Mode { automatic, require, off };

/// The environment variable that carries the mode to ranks and to the model check.
inline constexpr const char* k_mode_variable = "EXPCTL_SANDBOX";

/// "auto", "require", "off" → the mode; anything else → nullopt.
std::optional<Mode> parse_mode(std::string_view text);
std::string_view mode_name(Mode mode);

/// The mode $EXPCTL_SANDBOX names (automatic when unset); throws util::UsageError on another value.
Mode mode_from_environment();

/// The Landlock ABI this process may use: what the kernel reports, at most $EXPCTL_LANDLOCK_ABI_MAX
/// when that is set (0 there: act as on a kernel without Landlock; tests use it). 0: no Landlock.
int landlock_abi();

/// "landlock ABI 7", or why there is no sandbox here ("this kernel has no Landlock (...)").
std::string describe_availability();

/// Where a sandboxed process may write: whole folders (created when missing) and single files;
/// the character devices every process writes (/dev/null, /dev/tty, GPUs) are added by the sandbox.
struct Writable {
  std::vector<std::filesystem::path> folders;
  std::vector<std::filesystem::path> files;
  std::string described = "the folders it may write";  ///< for messages: "the run's folder"
};

/// A Landlock ruleset, not yet enforced: built in a process that may still look at the file
/// system, enforced later (in the child between fork and exec: enforce() is async-signal-safe).
class Ruleset {
 public:
  /// Throws util::UsageError naming the path when a writable folder cannot be opened, and
  /// util::InternalError when the kernel refuses the ruleset. Requires landlock_abi() > 0.
  explicit Ruleset(const Writable& writable);
  ~Ruleset();
  Ruleset(const Ruleset&) = delete;
  Ruleset& operator=(const Ruleset&) = delete;

  /// The ruleset's descriptor (close-on-exec), for a child to enforce.
  int fd() const { return m_fd; }

  /// no_new_privs, then landlock_restrict_self on the calling thread. Returns 0 or an errno.
  static int enforce(int ruleset_fd) noexcept;

 private:
  int m_fd = -1;
};

/// Restricts the calling thread (and what it starts later) to `writable`. Returns whether it
/// did: false when Landlock is unavailable (and mode is automatic) or mode is off. Throws
/// util::UsageError when mode is require and Landlock is unavailable.
bool restrict_writes(const Writable& writable, Mode mode);

/// Whether restrict_writes() restricted this thread.
bool restricted();

/// `message` (an error of `who`, code run inside the sandbox) with what the sandbox refused said
/// first when it is a refused write ("Permission denied" once restrict_writes() restricted this
/// process): "the model tried to write outside the run's folder; expctl's sandbox (Landlock)
/// refused it (...): <message>". Otherwise `message` as it is.
std::string explain_refusal(std::string_view who, const std::string& message);

}  // namespace expctl::util::sandbox
