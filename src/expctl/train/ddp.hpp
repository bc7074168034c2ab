#pragma once
/// Distributed data parallelism for a C++ `torch::nn::Module`, the way PyTorch's DDP reducer does
/// it: parameters and buffers are broadcast from rank 0 at construction; gradients are grouped
/// into flat, dtype-homogeneous buckets in reverse registration order (a ~1 MiB first bucket, then
/// `bucket_cap`), and a hook on each parameter's gradient accumulator launches a bucket's
/// asynchronous all-reduce the moment its last gradient is ready, strictly in bucket order so all
/// ranks issue the same collectives. Each `.grad` is a view of its bucket slice (Python's
/// `gradient_as_bucket_view=True`): autograd accumulates into the buffer that is reduced, and the
/// averaged gradients are in `.grad` when the last bucket's all-reduce completes, with no copies
/// in either direction. At the end of backward every bucket is waited on.
///
/// Use per optimizer step:
///   ddp.zero_grad();                                      // not the optimizer's (see zero_grad)
///   { auto guard = ddp.no_sync(); loss_k.backward(); }   // micro-steps 1..k-1: no communication
///   loss.backward();                                      // boundary: all-reduce overlaps backward
///   ddp.finish();                                         // rethrows a communication error
///   optimizer.step();
///
/// Differences from Python DDP: `no_sync` must cover the backward (Python: the forward);
/// parameters without a gradient in a synchronised backward are reduced with what their `.grad`
/// holds (zero after zero_grad); `.grad` is always defined (a bucket view); buckets are fixed at
/// construction (no ready-order rebuild after step 1).

#include <torch/nn/module.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "expctl/train/process_group.hpp"

#include "expctl/train/options.hpp"

namespace torch::autograd {
struct Node;
}

namespace expctl::train {

class PowerSgd;

/// Parameters of `module` that require grad, in registration order (Python's order), each tensor
/// once: tied parameters (one TensorImpl registered twice) are listed at their first position.
std::vector<at::Tensor> unique_parameters(const torch::nn::Module& module);

/// Bucket assignment: `params` in registration order are walked in reverse; each (dtype, device)
/// has an open bucket that closes when it reaches its limit (the first closing bucket of a kind
/// uses `first_bucket_bytes`, later ones `bucket_cap_bytes`). Buckets are ordered by when their
/// first gradient is expected (bucket 0 holds the last-registered parameters). Each bucket lists
/// parameter indices in the order their gradients are expected.
std::vector<std::vector<std::size_t>> compute_bucket_assignment(const std::vector<at::Tensor>& params,
                                                                std::int64_t first_bucket_bytes,
                                                                std::int64_t bucket_cap_bytes);

/// The reducer. Holds references to `module` and `communicator`, which must outlive it.
class DistributedDataParallel {
 public:
  /// Checks that every rank has the same parameter shapes, broadcasts parameters and buffers from
  /// rank 0 and registers the gradient hooks (none in a world of size 1, where nothing is sent).
  DistributedDataParallel(torch::nn::Module& module, Communicator& communicator, DdpOptions options = {});
  /// The same over a model's trainable `parameters` (registration order, each once) and its
  /// `buffers` (train::Model::parameters() and buffers()).
  DistributedDataParallel(std::vector<at::Tensor> parameters, std::vector<at::Tensor> buffers,
                          Communicator& communicator, DdpOptions options = {});
  /// Removes the hooks from the gradient accumulators.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// While alive, backward passes only accumulate local gradients (no communication).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& m_ddp;
    bool m_previous;
  };
  /// Gradient-accumulation scope (Python's `ddp.no_sync()`).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  /// Whether the next backward will all-reduce.
  bool sync_enabled() const { return m_sync_enabled; }

  /// Call after each synchronised backward, before the optimizer step: rethrows a communication
  /// error (TrainError naming the bucket) captured at the end of backward.
  void finish();

  /// Zeroes every gradient in place (one fill per bucket), keeping `.grad` the bucket views;
  /// use it instead of the optimizer's zero_grad, which on LibTorch 2.x sets gradients to None.
  void zero_grad();

  /// This rank's wish to stop, sent with the next synchronised backward (in a spare element of
  /// the last bucket: no collective of its own).
  void vote_stop(bool stop) { m_stop_vote = stop; }
  /// Whether any rank voted to stop in the last synchronised backward (the same answer on every
  /// rank). In a world of one: this rank's own vote.
  bool stop_voted() const { return m_buckets.empty() ? m_stop_vote : m_stop_voted; }
  /// This rank's loss in the step is not finite: votes like vote_stop (set before the
  /// synchronised backward), so every rank learns after it whether any rank's loss was NaN/Inf.
  void vote_nonfinite(bool nonfinite) { m_nonfinite_vote = nonfinite; }
  /// Whether any rank voted non-finite in the last synchronised backward (world of one: own vote).
  bool nonfinite_voted() const { return m_buckets.empty() ? m_nonfinite_vote : m_nonfinite_voted; }

  /// Broadcasts the module's buffers from rank 0 (Python's broadcast_buffers: before the first
  /// forward after a synchronised backward, i.e. once per optimizer step and before evaluation);
  /// nothing in a world of one or without buffers.
  void broadcast_buffers();

  /// Parameters under synchronisation (see `unique_parameters`).
  const std::vector<at::Tensor>& parameters() const { return m_params; }
  /// Bucket assignment (see `compute_bucket_assignment`).
  std::vector<std::vector<std::size_t>> bucket_assignment() const;
  /// Bucket all-reduces launched since construction.
  std::int64_t allreduces_launched() const { return m_launched_total; }
  /// Reports the bucket waited for at the end of backward (null: nothing reported).
  void set_beacon(Beacon* beacon) { m_beacon = beacon; }
  /// Bytes all-reduced by this rank since construction (what went on the wire: fp16 halves it).
  std::int64_t bytes_allreduced() const { return m_bytes_total; }
  /// The compressor of `grad_compression: powersgd` (null otherwise, and in a world of one).
  const PowerSgd* powersgd() const { return m_powersgd.get(); }

 private:
  struct Bucket;
  struct Hook;
  friend struct Hook;

  void verify_same_model();
  void broadcast_tensors(std::vector<at::Tensor> tensors, const char* what);
  void register_hooks();
  void on_gradient_ready(std::size_t param_index);
  void launch_ready_buckets();
  void launch(std::size_t bucket_index);
  void end_of_backward();
  void reduce_buckets();
  void wait_buckets(bool compressed);
  void report_wait(std::size_t bucket_index);
  void make_powersgd();
  void reset_iteration();
  at::Tensor bucket_view(std::size_t param_index) const;
  void attach_gradient(std::size_t param_index);

  std::vector<at::Tensor> m_buffers;
  Communicator& m_comm;
  DdpOptions m_options;
  std::vector<at::Tensor> m_params;
  std::vector<std::unique_ptr<Bucket>> m_buckets;
  std::vector<std::size_t> m_bucket_of;        // parameter index -> bucket index
  std::vector<std::size_t> m_offset_of;        // parameter index -> element offset in its bucket
  std::vector<at::Tensor> m_slices;            // parameter index -> its gradient's place in its bucket
  std::vector<bool> m_ready;                   // parameter index -> gradient copied this iteration
  std::vector<std::shared_ptr<torch::autograd::Node>> m_accumulators;  // keeps hooks alive
  std::vector<std::uintptr_t> m_hook_keys;
  std::mutex m_mutex;
  bool m_sync_enabled = true;
  bool m_in_backward = false;
  bool m_armed = false;
  std::size_t m_next_bucket = 0;
  std::exception_ptr m_error;
  std::int64_t m_launched_total = 0;
  std::int64_t m_bytes_total = 0;
  Beacon* m_beacon = nullptr;
  std::int64_t m_vote_offset = 0;  // first of the last bucket's two vote elements (stop, non-finite)
  bool m_stop_vote = false;
  bool m_stop_voted = false;
  bool m_nonfinite_vote = false;
  bool m_nonfinite_voted = false;
  std::unique_ptr<PowerSgd> m_powersgd;
};

}  // namespace expctl::train
