#pragma once
/// The shared-memory segments of expctl's intra-host all-reduce (train/shm_allreduce.hpp) are
/// named "/dev/shm/expctl-<group tag>-<pid of the rank that created it>" and unlinked by their
/// creator once every rank of the host has mapped them. A rank killed before that moment leaves
/// its name behind; the supervisor removes it after the ranks ended.

#include <sys/types.h>

#include <filesystem>
#include <vector>

namespace expctl::launch {

/// Where the segments live: $EXPCTL_SHM_DIR, default /dev/shm.
std::filesystem::path shm_segment_directory();

/// Unlinks the entries of `directory` named "expctl-*-<pid>" for each of `pids` (this user's
/// ranks, just reaped: no live process can still be joining them). Returns how many.
int remove_shm_segments(const std::vector<pid_t>& pids,
                        const std::filesystem::path& directory = shm_segment_directory());

}  // namespace expctl::launch
