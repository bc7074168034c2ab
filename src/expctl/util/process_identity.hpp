#pragma once
/// Which process owns something (a run), told apart from a later process that got the same pid:
/// a pid is unique only together with its machine, that machine's boot and the process's start
/// time. Linux only (/proc); no SQLite, no torch.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace expctl::util {

/// What this machine can tell about a process.
enum class Liveness {
  alive,              ///< running here now: same host, same boot, same pid and start time
  dead,               ///< it was a process of this host and is gone (exited, zombie, or its boot ended)
  unknown_elsewhere,  ///< a process of another host: /proc here cannot tell
};

struct ProcessIdentity {
  std::string host{};            ///< host_name()
  std::int64_t pid = 0;          ///< getpid()
  std::string boot_id{};         ///< /proc/sys/kernel/random/boot_id: changes at every boot
  std::int64_t start_ticks = 0;  ///< field 22 of /proc/<pid>/stat: clock ticks after boot

  /// The calling process (computed afresh on every call, so a forked child gets its own).
  static ProcessIdentity current();

  /// Alive, dead or on another host. A process of this host from another boot is dead, and so
  /// is a pid that now belongs to a process started at another time (a recycled pid).
  Liveness liveness() const;
  /// True iff this host and boot match and /proc/<pid>/stat shows the same start time.
  bool is_alive_here() const { return liveness() == Liveness::alive; }
  /// "host:pid", for display.
  std::string display() const;
};

/// This machine's host name (gethostname, read once per process); "localhost" when it cannot be
/// read (Linux's gethostname fails only for a buffer too small, and ours holds HOST_NAME_MAX).
const std::string& host_name();

/// Seconds since the calling process started (its exec, not main: loading shared libraries
/// counts), from field 22 of /proc/self/stat and CLOCK_BOOTTIME; nullopt when they cannot be read.
std::optional<double> seconds_since_process_start();

/// What ProcessIdentity needs of one /proc/<pid>/stat line.
struct ProcStat {
  char state = '?';              ///< field 3: R, S, D, Z (zombie), X (dead), ...
  std::int64_t start_ticks = 0;  ///< field 22
};

/// Parses a /proc/<pid>/stat line. The command name (field 2) may hold spaces and ')', so the
/// fields are counted after the last ')'. nullopt when the line is not of that shape.
std::optional<ProcStat> parse_proc_stat(std::string_view line);

/// /proc/<pid>/stat of a process of this machine, or nullopt when there is no such process.
std::optional<ProcStat> read_proc_stat(std::int64_t pid);

/// The inode of a namespace link such as /proc/self/ns/pid ("4026531836"): equal for two
/// processes exactly when they share that namespace; "?" when it cannot be read.
std::string namespace_inode(const char* path);

}  // namespace expctl::util
