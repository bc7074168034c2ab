#pragma once
/// glibc malloc settings for a training process.
///
/// By default glibc serves blocks above a moving threshold (128 KiB at start) with mmap and
/// returns them to the kernel when freed, and trims the top of the heap beyond 128 KiB. A
/// training step allocates and frees the same large tensors (activations, gradients, im2col
/// buffers) every step, so depending on the order of its first allocations a process either
/// reuses that memory or maps, faults in and unmaps megabytes every step. Measured on the cnn
/// benchmark (2 ranks): 31 ms against 37 ms per step, and which one a run got was decided by
/// chance. Raising both thresholds makes it the fast one every time. Results are unaffected:
/// only where memory comes from changes.

#include <cstddef>
#include <string>

namespace expctl::util {

/// Blocks up to this size come from the heap, never from their own mmap (glibc's maximum).
inline constexpr std::size_t k_training_mmap_threshold = 32UL * 1024 * 1024;
/// Freed memory at the top of the heap is kept up to this size instead of being returned.
inline constexpr std::size_t k_training_trim_threshold = 512UL * 1024 * 1024;

/// Applies the two thresholds with mallopt, unless the user chose for themselves
/// (GLIBC_TUNABLES mentions glibc.malloc) or turned it off (EXPCTL_MALLOC_TUNING=off).
/// Returns one line saying what was done, for the rank's log.
std::string tune_malloc_for_training();

/// The same thresholds for a short command that reads long series (compare): each series read
/// allocates and frees megabytes, which glibc would hand back to the kernel and fault in again
/// for the next (two 100 000-step runs from PostgreSQL: about 8 % of compare's time). Not for
/// `serve`, which lives long and should give memory back.
std::string tune_malloc_for_bulk_reads();

}  // namespace expctl::util
