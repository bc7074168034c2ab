#pragma once
/// All-reduce through POSIX shared memory for the ranks of one host (docs/run.md, "All-reduce").
///
/// Which ranks share a host is decided from what each rank reports through the rendezvous store
/// (the kernel's boot id and the inodes of its mount and network namespaces), never from
/// LOCAL_WORLD_SIZE: two containers or network namespaces on one machine are two hosts.
///
/// One segment per host and process group: a header with a barrier counter, two sets of one slot
/// per local rank (successive chunks alternate between them) and a result area. A SUM on one
/// host is: every rank copies its chunk into its slot; barrier; every rank sums the slots in
/// local-rank order (slot 0 + slot 1 + ...: a fixed order, so reruns are bitwise identical
/// whatever the timing) straight into its own tensor. Across hosts: after the first barrier
/// rank r sums its 1/L share into the result area; barrier; local rank 0 all-gathers the hosts'
/// sums over Gloo, one rank per host, and adds them in host order; barrier; every rank copies the
/// result out. Tensors larger than a slot go chunk by chunk. (Gloo's own ring all-reduce is not
/// used between hosts: its order depends on the ring, and on LibTorch 1.13 its float16 sum
/// between the first ranks of two hosts dropped one side's values in
/// tests/unit/train/test_shm_allreduce.cpp.)
///
/// The segment's name is unlinked as soon as every local rank has mapped it, so no exit path,
/// SIGKILL included, can leave it in /dev/shm; a rank killed before that point leaves a name
/// ending in "-<pid of local rank 0>", which the supervisor removes (launch::remove_shm_segments).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "expctl/util/error.hpp"

namespace expctl::train {

/// Where each rank of the world lives.
struct HostLayout {
  std::vector<int> host_of;         ///< host index per rank (hosts numbered by their lowest rank)
  std::vector<std::vector<int>> hosts;  ///< the ranks of each host, ascending
  int host_count() const { return static_cast<int>(hosts.size()); }
  /// This rank's position among the ranks of its host.
  int local_index(int rank) const;
  /// The most ranks any host has.
  int largest_host() const;
};

/// This process's host identity: boot id, mount and network namespace inodes; or the value of
/// EXPCTL_HOST_ID when set (ranks with different values never share memory: for tests, and for
/// machines whose /dev/shm is not one).
std::string host_identity();

/// Groups ranks by identity (identities[r] is rank r's).
HostLayout layout_from_identities(const std::vector<std::string>& identities);

/// Every rank publishes host_identity() under "<prefix>/<rank>" and reads everyone's.
HostLayout exchange_host_layout(c10d::Store& store, int rank, int world_size);

/// Bytes of one rank's slot: tensors above it are reduced chunk by chunk.
inline constexpr std::size_t k_shm_slot_bytes = std::size_t{4} << 20;

/// Calls `reduce(begin, count)` for each slot-sized chunk of the flat tensor `flat`. Every rank
/// of a hierarchical group, the only rank of a host included, cuts a tensor into these same
/// chunks (one exchange between hosts each).
template <typename Reduce>
void for_each_chunk(const at::Tensor& flat, Reduce&& reduce) {
  const auto per_chunk = static_cast<std::int64_t>(k_shm_slot_bytes / flat.element_size());
  for (std::int64_t begin = 0; begin < flat.numel(); begin += per_chunk) {
    reduce(begin, std::min(per_chunk, flat.numel() - begin));
  }
}

/// Shared memory cannot be used on this host (no space, no /dev/shm, ranks that do not share it);
/// every local rank throws it together, and the process group falls back to Gloo.
class ShmUnavailable : public util::TrainError {
 public:
  using util::TrainError::TrainError;
};

/// Whether `path`, published on the job's store by local rank 0, names a segment of the group
/// `tag`: "<directory>/expctl-<tag>-<pid>". Any other path (a user's file, a link elsewhere) is
/// refused before it is opened for writing.
bool is_segment_path(const std::string& path, const std::filesystem::path& directory, const std::string& tag);

/// The ranks of one host, joined through one shared segment.
class ShmReducer {
 public:
  /// Joins the host's segment (local index 0 creates it, the others map it, then 0 unlinks it),
  /// a file in $EXPCTL_SHM_DIR (default /dev/shm). `tag` makes the name unique per process
  /// group. Throws ShmUnavailable, on every local rank alike, when any of them cannot.
  ShmReducer(c10d::Store& store, const std::string& tag, int local_index, int local_size,
             std::chrono::milliseconds timeout);
  ~ShmReducer();
  ShmReducer(const ShmReducer&) = delete;
  ShmReducer& operator=(const ShmReducer&) = delete;

  /// Reduces the result area of one chunk across hosts, in place (local index 0 only): the
  /// hierarchical step. Empty for a single host.
  using CrossHost = std::function<void(at::Tensor& chunk)>;

  /// In-place SUM of a contiguous CPU tensor over the host's ranks (and across hosts through
  /// `cross_host`). `what` names the collective in a timeout. Every local rank must call it with
  /// a tensor of the same dtype and size, in the same order.
  void allreduce(at::Tensor& tensor, const std::string& what, const CrossHost& cross_host = {});

  int local_size() const { return m_local_size; }

 private:
  struct Header;
  int open_segment(c10d::Store& store, const std::string& key, const std::string& tag);
  void release();
  void watch_peers(c10d::Store& store, const std::string& key);
  void check_peers(const std::string& what) const;
  void barrier(const std::string& what);
  void reduce_chunk(at::Tensor& flat, std::int64_t begin, std::int64_t count, const std::string& what,
                    const CrossHost& cross_host);
  std::byte* slot(int set, int index) const;
  std::byte* result() const;

  int m_local_index;
  int m_local_size;
  std::chrono::milliseconds m_timeout;
  std::size_t m_bytes = 0;
  std::string m_path;  ///< the segment's file (local index 0, until unlinked)
  void* m_base = nullptr;
  Header* m_header = nullptr;
  std::uint64_t m_barriers = 0;
  std::uint64_t m_chunks = 0;       ///< chunks reduced so far: their parity picks the slot set
  std::vector<int> m_peer_pids;     ///< by local index (this rank's own included)
  std::vector<int> m_peer_pidfds;   ///< readable once that peer has exited; -1: none (own, or no pidfd)
};

}  // namespace expctl::train
