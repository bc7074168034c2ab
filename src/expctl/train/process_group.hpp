#pragma once
/// Rendezvous and collectives for one rank: a c10d TCPStore (rank 0 serves it) wrapped in a
/// PrefixStore, and ProcessGroupGloo (CPU) or ProcessGroupNCCL (CUDA builds). `Communicator` is the
/// only way the rest of expctl talks to c10d: every collective carries a name, so a hang ends with
/// "allreduce of bucket 3 timed out after 30 s" instead of Gloo's anonymous "Operation timed out!".

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "expctl/train/compat.hpp"

#include "expctl/train/options.hpp"

namespace expctl::train {


/// A collective in flight: wait on it with `Communicator::wait`.
struct PendingCollective {
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
  std::uint64_t shm_sequence = 0;  ///< a queued shared-memory all-reduce (1-based); 0: none
  bool complete = false;           ///< a world of one: nothing to exchange, done when started
};

class ShmReducer;

/// The local IPv4/IPv6 address this host uses to reach `host` (a connected UDP socket's own
/// address; nothing is sent). "127.0.0.1" for loopback. Throws TrainError if `host` is unknown.
std::string local_address_towards(const std::string& host);

/// A TCP port on 127.0.0.1 that was free a moment ago (for tests and single-node launches).
std::uint16_t pick_free_port();

/// One rank's membership in the process group. Construction blocks until all ranks joined.
class Communicator {
 public:
  /// Joins the group; throws TrainError naming MASTER_ADDR:MASTER_PORT if rendezvous fails.
  explicit Communicator(const ProcessGroupOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return m_rank; }
  int world_size() const { return m_world_size; }
  Backend backend() const { return m_backend; }
  /// Device the collectives' tensors must live on (CPU for Gloo, cuda:local_rank for NCCL).
  c10::Device device() const { return m_device; }
  std::chrono::milliseconds timeout() const { return m_timeout; }

  /// Starts an in-place SUM all-reduce of `tensor` (Gloo has no AVG: pre-scale instead). On the
  /// shared-memory path it is queued and runs, in launch order, when it (or a later one) is
  /// waited on or another collective starts: one rank never blocks its peers mid-backward.
  PendingCollective allreduce_async(at::Tensor& tensor, std::string what);
  /// Which all-reduce runs: "shm" (one host), "hierarchical" (shared memory on each host, Gloo
  /// between hosts), "gloo", "nccl", or "none" (a Gloo world of one: every collective is the
  /// identity). It fixes the summation order, so runs record it.
  const std::string& allreduce_algorithm() const { return m_algorithm; }
  /// Starts an in-place broadcast of `tensor` from `root`.
  PendingCollective broadcast_async(at::Tensor& tensor, int root, std::string what);
  /// Blocks until `pending` completes; throws TrainError "<what> timed out after N s" or
  /// "<what> failed: <reason>". Time spent here is added to `wait_seconds()`.
  void wait(PendingCollective& pending);

  /// Synchronous SUM all-reduce.
  void allreduce(at::Tensor& tensor, std::string what);
  /// Synchronous broadcast from `root`.
  void broadcast(at::Tensor& tensor, int root, std::string what);
  /// Blocks until every rank reached the barrier.
  void barrier(std::string what);
  /// Gloo's monitoredBarrier: rank 0 waits for every other rank for up to the collective timeout
  /// and the error names each rank that did not arrive (a desynchronised or stuck rank). Gloo only
  /// (TrainError otherwise).
  void monitored_barrier(const std::string& what);
  /// Synchronous all-gather: every rank's `tensor` (same shape and dtype everywhere), by rank.
  std::vector<at::Tensor> allgather(const at::Tensor& tensor, std::string what);

  /// Number of collectives started so far (all kinds).
  std::int64_t collectives_issued() const { return m_issued; }
  /// Seconds spent blocked in `wait` (or running queued all-reduces) so far, for
  /// comm_wait_fraction; a wait nested in another (the exchange between hosts inside a queued
  /// all-reduce) counts once.
  double wait_seconds() const { return m_wait_seconds; }

 private:
  struct Queued {
    at::Tensor tensor;
    std::string what;
  };
  void setup_allreduce(const ProcessGroupOptions& options);
  bool every_host_has_shm(const std::string& problem, int host, int local);
  bool takes_shm_path(const at::Tensor& tensor) const;
  void run_queued(std::uint64_t through);
  void flush_queue() { run_queued(m_shm_launched); }
  void reduce_on_host(Queued& queued);
  void leaders_allreduce(at::Tensor& tensor, const std::string& what);
  void wait_work(PendingCollective& pending);
  PendingCollective completed(std::string what);
  class WaitTimer;

  int m_rank;
  int m_world_size;
  Backend m_backend;
  c10::Device m_device;
  std::chrono::milliseconds m_timeout;
  c10::intrusive_ptr<c10d::Store> m_store;
  c10::intrusive_ptr<compat::CollectiveBackend> m_group;  ///< null in a Gloo world of one
  std::string m_algorithm;
  bool m_across_hosts = false;                          ///< hierarchical: a step between hosts
  std::unique_ptr<ShmReducer> m_shm;                    ///< the ranks of this host (two or more)
  c10::intrusive_ptr<compat::CollectiveBackend> m_leaders;  ///< one rank per host (hierarchical)
  std::deque<Queued> m_queue;                           ///< launched, not yet run (FIFO)
  std::uint64_t m_shm_launched = 0;
  std::uint64_t m_shm_done = 0;
  std::int64_t m_issued = 0;
  double m_wait_seconds = 0.0;
  bool m_timing_wait = false;  ///< inside a timed wait: a nested one is not counted twice
};

}  // namespace expctl::train
