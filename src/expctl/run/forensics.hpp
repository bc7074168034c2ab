#pragma once
/// Hang forensics: what a run keeps of a rank that stopped answering, before it is killed.
///
/// Each rank's heartbeat carries where its training thread is ("step=42 phase=comm_wait
/// bucket=0", train::Beacon); the supervisor keeps every rank's last one and the root cause names
/// them. The stuck rank's native stack (every thread) is saved with eu-stack (elfutils) or, if
/// that is missing, gdb, as logs/rank-<R>.stack.txt, an artifact of the run. Ranks allow their
/// supervisor and its children to attach (PR_SET_PTRACER), which Yama's default ptrace_scope 1
/// otherwise refuses to anyone but root.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace expctl::run {

/// How long a stack tool may take before it is killed.
inline constexpr std::chrono::seconds k_stack_timeout{20};

/// The command that prints every thread's stack of `pid` with the first tool found on PATH
/// (eu-stack, then gdb); empty when neither is installed.
std::vector<std::string> stack_command(pid_t pid);

/// What a stack capture left: the file written, or why there is none (one line).
struct StackCapture {
  std::optional<std::filesystem::path> path;  ///< relative to the run folder
  std::string note;
};

/// Writes `pid`'s native stack into <run_dir>/logs/rank-<rank>.stack.txt.
StackCapture save_native_stack(const std::filesystem::path& run_dir, int rank, pid_t pid);

/// "; last heartbeats: rank 0 at step 42 in comm_wait on bucket 0, rank 1 at step 42 in backward":
/// the supervisor's last heartbeat payload of every rank, in words; empty without any.
std::string heartbeats_text(const std::map<int, std::string>& heartbeats);

/// Lets the parent process (the supervisor) and its children ptrace this process.
void allow_parent_to_trace();

}  // namespace expctl::run
