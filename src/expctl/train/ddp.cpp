#include "expctl/train/ddp.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <unordered_set>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "expctl/train/powersgd.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

struct BucketKey {
  at::ScalarType dtype;
  std::string device;
  bool operator<(const BucketKey& other) const {
    return std::tie(dtype, device) < std::tie(other.dtype, other.device);
  }
};

std::int64_t tensor_bytes(const at::Tensor& tensor) {
  return tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
}

}  // namespace

/// One flat gradient buffer; each parameter's `.grad` is a view of its slice (Python DDP's
/// gradient_as_bucket_view), so autograd accumulates straight into the buffer that is reduced.
struct DistributedDataParallel::Bucket {
  std::vector<std::size_t> params;
  at::Tensor flat;
  at::Tensor wire;  // what is all-reduced: `flat` itself or its float16 copy
  std::size_t pending = 0;
  bool launched = false;
  PendingCollective collective;
};

/// Runs after a parameter's AccumulateGrad node, when `.grad` holds this backward's gradient.
/// A plain FunctionPostHook subclass compiles on 1.13 and 2.x (LambdaPostHook's ctor changed).
struct DistributedDataParallel::Hook : torch::autograd::FunctionPostHook {
  Hook(DistributedDataParallel& ddp, std::size_t index) : m_ddp(ddp), m_index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    m_ddp.on_gradient_ready(m_index);
    return outputs;
  }
  DistributedDataParallel& m_ddp;
  std::size_t m_index;
};

std::vector<at::Tensor> unique_parameters(const torch::nn::Module& module) {
  std::vector<at::Tensor> result;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& param : module.parameters(/*recurse=*/true)) {
    if (param.requires_grad() && seen.insert(param.unsafeGetTensorImpl()).second) {
      result.push_back(param);
    }
  }
  return result;
}

std::vector<std::vector<std::size_t>> compute_bucket_assignment(const std::vector<at::Tensor>& params,
                                                                std::int64_t first_bucket_bytes,
                                                                std::int64_t bucket_cap_bytes) {
  struct Open {
    std::vector<std::size_t> members;
    std::int64_t bytes = 0;
    bool first_closed = false;
  };
  std::map<BucketKey, Open> open;
  std::vector<std::vector<std::size_t>> buckets;
  for (std::size_t i = params.size(); i-- > 0;) {
    auto& bucket = open[BucketKey{params[i].scalar_type(), params[i].device().str()}];
    bucket.members.push_back(i);
    bucket.bytes += tensor_bytes(params[i]);
    if (bucket.bytes >= (bucket.first_closed ? bucket_cap_bytes : first_bucket_bytes)) {
      buckets.push_back(std::move(bucket.members));
      bucket = Open{{}, 0, true};
    }
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.members.empty()) {
      buckets.push_back(std::move(bucket.members));
    }
  }
  // Gradients arrive roughly in reverse registration order, so a bucket whose first member was
  // registered later is ready earlier and gets a lower index.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return buckets;
}

DistributedDataParallel::DistributedDataParallel(torch::nn::Module& module, Communicator& communicator,
                                                 DdpOptions options)
    : DistributedDataParallel(unique_parameters(module), module.buffers(/*recurse=*/true), communicator, options) {}

DistributedDataParallel::DistributedDataParallel(std::vector<at::Tensor> parameters, std::vector<at::Tensor> buffers,
                                                 Communicator& communicator, DdpOptions options)
    : m_buffers(std::move(buffers)), m_comm(communicator), m_options(options), m_params(std::move(parameters)) {
  EXPCTL_CHECK(options.first_bucket_bytes > 0 && options.bucket_cap_bytes > 0, TrainError,
               "bucket sizes must be positive (first {} bytes, cap {} bytes)", options.first_bucket_bytes,
               options.bucket_cap_bytes);
  if (m_comm.world_size() == 1) {
    return;  // nothing to agree on and nothing to average: no hooks, no buffers, no cost
  }
  verify_same_model();
  std::vector<at::Tensor> states = m_params;
  states.insert(states.end(), m_buffers.begin(), m_buffers.end());
  broadcast_tensors(states, "broadcast of parameters and buffers from rank 0");
  register_hooks();
}

DistributedDataParallel::~DistributedDataParallel() {
  for (std::size_t i = 0; i < m_accumulators.size(); ++i) {
    m_accumulators[i]->del_post_hook(m_hook_keys[i]);
  }
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : m_ddp(ddp), m_previous(ddp.m_sync_enabled) {
  m_ddp.m_sync_enabled = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  m_ddp.m_sync_enabled = m_previous;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_assignment() const {
  std::vector<std::vector<std::size_t>> result;
  for (const auto& bucket : m_buckets) {
    result.push_back(bucket->params);
  }
  return result;
}

// The cheap part of Python's verify_params_across_processes: rank 0's parameter count and
// shapes, folded into a few numbers, must match everyone's, or the all-reduces would mix tensors.
void DistributedDataParallel::verify_same_model() {
  std::int64_t numel = 0;
  // Unsigned: it wraps, and only equality matters (a signed product overflowing is undefined
  // behaviour; UBSan stopped every DDP rank of more than a few parameters here).
  std::uint64_t shape_hash = 0;
  for (const auto& param : m_params) {
    numel += param.numel();
    for (const auto size : param.sizes()) {
      shape_hash = shape_hash * 1000003U + static_cast<std::uint64_t>(size);
    }
  }
  auto mine = at::tensor({static_cast<std::int64_t>(m_params.size()), numel, std::bit_cast<std::int64_t>(shape_hash)},
                         at::kLong);
  auto theirs = mine.clone().to(m_comm.device());
  m_comm.broadcast(theirs, 0, "broadcast of rank 0's model shape");
  theirs = theirs.cpu();
  EXPCTL_CHECK(at::equal(mine, theirs), TrainError,
               "rank {} built a different model than rank 0 ({} parameters with {} elements vs {} with {}): "
               "every rank must use the same spec",
               m_comm.rank(), m_params.size(), numel, theirs[0].item<std::int64_t>(), theirs[1].item<std::int64_t>());
}

// Python's _broadcast_coalesced: one flat broadcast per dtype instead of one per tensor.
void DistributedDataParallel::broadcast_tensors(std::vector<at::Tensor> tensors, const char* what) {
  at::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (auto& tensor : tensors) {
    by_dtype[tensor.scalar_type()].push_back(tensor);
  }
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> flat_views;
    for (const auto& tensor : group) {
      flat_views.push_back(tensor.reshape({-1}));
    }
    auto flat = at::cat(flat_views).to(m_comm.device());
    m_comm.broadcast(flat, 0, what);
    std::int64_t offset = 0;
    for (auto& tensor : group) {
      tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
}

void DistributedDataParallel::broadcast_buffers() {
  if (m_comm.world_size() == 1) {
    return;
  }
  if (!m_buffers.empty()) {
    broadcast_tensors(m_buffers, "broadcast of buffers from rank 0");
  }
}

void DistributedDataParallel::register_hooks() {
  const auto assignment =
      compute_bucket_assignment(m_params, m_options.first_bucket_bytes, m_options.bucket_cap_bytes);
  m_bucket_of.assign(m_params.size(), 0);
  m_offset_of.assign(m_params.size(), 0);
  m_ready.assign(m_params.size(), false);
  for (std::size_t b = 0; b < assignment.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->params = assignment[b];
    std::int64_t elements = 0;
    for (const auto index : bucket->params) {
      m_bucket_of[index] = b;
      m_offset_of[index] = static_cast<std::size_t>(elements);
      elements += m_params[index].numel();
    }
    // The last bucket is reduced last: two spare elements there carry the stop votes and the
    // non-finite-loss votes (see vote_stop, vote_nonfinite), so agreeing costs no collective.
    const bool last = b + 1 == assignment.size();
    bucket->flat = at::zeros({elements + (last ? 2 : 0)}, m_params[bucket->params.front()].options().requires_grad(false));
    if (last) {
      m_vote_offset = elements;
    }
    m_buckets.push_back(std::move(bucket));
  }
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    m_slices.push_back(bucket_view(i));
    attach_gradient(i);
  }
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    // The autograd metadata holds the accumulator only weakly: without our shared_ptr it would be
    // recreated at the next forward and the hook lost.
    auto accumulator = torch::autograd::impl::grad_accumulator(m_params[i]);
    EXPCTL_ASSERT(accumulator != nullptr, "parameter {} has no gradient accumulator", i);
    m_hook_keys.push_back(accumulator->add_post_hook(std::make_unique<Hook>(*this, i)));
    m_accumulators.push_back(std::move(accumulator));
  }
  make_powersgd();
  reset_iteration();
}

void DistributedDataParallel::make_powersgd() {
  if (m_options.compression != GradCompression::powersgd) {
    return;
  }
  std::vector<std::vector<std::vector<std::int64_t>>> shapes;
  for (const auto& bucket : m_buckets) {
    shapes.emplace_back();
    for (const auto index : bucket->params) {
      shapes.back().push_back(m_params[index].sizes().vec());
    }
  }
  m_powersgd = std::make_unique<PowerSgd>(
      m_comm, std::move(shapes), PowerSgdOptions{m_options.powersgd_rank, m_options.powersgd_warmup_steps});
}

// The slice as a plain tensor on the bucket's storage rather than an autograd view of `flat`:
// LibTorch 1.13's Optimizer::zero_grad calls detach_() on every gradient, which autograd refuses
// for views (Python DDP's gradient_as_bucket_view trips over the same check).
at::Tensor DistributedDataParallel::bucket_view(std::size_t param_index) const {
  const auto& param = m_params[param_index];
  const auto& flat = m_buckets[m_bucket_of[param_index]]->flat;
  auto slice = at::empty({0}, flat.options());
  slice.set_(flat.storage(), flat.storage_offset() + static_cast<std::int64_t>(m_offset_of[param_index]),
             param.sizes());  // no strides: contiguous
  return slice;
}

// Makes `.grad` the parameter's bucket slice again when something replaced it (an optimizer that
// sets gradients to None, a user assignment), keeping what it held.
void DistributedDataParallel::attach_gradient(std::size_t param_index) {
  auto& param = m_params[param_index];
  auto& view = m_slices[param_index];
  const auto& grad = param.grad();
  if (grad.defined() && grad.data_ptr() == view.data_ptr()) {
    return;  // the usual case: autograd accumulated in place
  }
  if (grad.defined()) {
    view.copy_(grad);
  } else {
    view.zero_();
  }
  param.mutable_grad() = view;
}

void DistributedDataParallel::zero_grad() {
  at::NoGradGuard no_grad;
  if (m_buckets.empty()) {
    // A world of one: what LibTorch 1.13's Optimizer::zero_grad does (2.x sets them to None).
    for (auto& param : m_params) {
      if (param.grad().defined()) {
        param.mutable_grad().zero_();
      }
    }
    return;
  }
  for (auto& bucket : m_buckets) {
    bucket->flat.zero_();
  }
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    attach_gradient(i);
  }
}

void DistributedDataParallel::reset_iteration() {
  std::fill(m_ready.begin(), m_ready.end(), false);
  for (auto& bucket : m_buckets) {
    bucket->pending = bucket->params.size();
    bucket->launched = false;
    bucket->collective = PendingCollective{};
  }
  m_next_bucket = 0;
  m_in_backward = false;
  m_armed = false;
}

void DistributedDataParallel::on_gradient_ready(std::size_t param_index) {
  std::lock_guard lock(m_mutex);
  if (!m_in_backward) {
    // First hook of this backward: decide once whether it synchronises, and run the reduction
    // after the engine finished the whole graph (Python's finalize_backward).
    m_in_backward = true;
    m_armed = m_sync_enabled;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { end_of_backward(); });
  }
  if (!m_armed || m_error) {
    return;  // no_sync: the gradient stays accumulated in .grad, which is the bucket slice
  }
  EXPCTL_ASSERT(!m_ready[param_index], "gradient of parameter {} became ready twice in one backward", param_index);
  m_ready[param_index] = true;
  attach_gradient(param_index);  // normally a pointer comparison: autograd accumulated in place
  auto& bucket = *m_buckets[m_bucket_of[param_index]];
  if (--bucket.pending == 0) {
    launch_ready_buckets();
  }
}

void DistributedDataParallel::launch_ready_buckets() {
  // Strict index order on every rank: collectives must be issued in the same sequence everywhere.
  while (m_next_bucket < m_buckets.size() && m_buckets[m_next_bucket]->pending == 0) {
    launch(m_next_bucket++);
  }
}

void DistributedDataParallel::launch(std::size_t bucket_index) {
  auto& bucket = *m_buckets[bucket_index];
  if (bucket_index + 1 == m_buckets.size()) {
    // Averaged like the gradients: the reduced value is (voters / world size), > 0 iff anyone voted.
    bucket.flat[m_vote_offset].fill_(m_stop_vote ? 1.0 : 0.0);
    bucket.flat[m_vote_offset + 1].fill_(m_nonfinite_vote ? 1.0 : 0.0);
  }
  if (m_powersgd && m_powersgd->compressing()) {
    m_bytes_total += m_powersgd->launch(bucket_index, bucket.flat);  // the votes travel uncompressed
    bucket.launched = true;
    ++m_launched_total;
    return;
  }
  if (m_options.compression == GradCompression::fp16) {
    // PyTorch's fp16_compress_hook: cast, then divide in half precision.
    bucket.wire = bucket.flat.to(at::kHalf).div_(m_comm.world_size());
  } else {
    // Average = pre-divide, then SUM (Gloo has no AVG); the same order as PyTorch's reducer.
    bucket.flat.mul_(1.0 / m_comm.world_size());
    bucket.wire = bucket.flat;
  }
  bucket.collective = m_comm.allreduce_async(bucket.wire, fmt::format("allreduce of bucket {}", bucket_index));
  bucket.launched = true;
  ++m_launched_total;
  m_bytes_total += static_cast<std::int64_t>(bucket.wire.nbytes());
}

void DistributedDataParallel::end_of_backward() {
  std::lock_guard lock(m_mutex);
  try {
    if (m_armed && !m_error) {
      reduce_buckets();
    }
  } catch (...) {
    // Thrown out of the engine's callback it would lose its type; finish() rethrows it.
    m_error = std::current_exception();
  }
  reset_iteration();
}

void DistributedDataParallel::reduce_buckets() {
  // A parameter that got no gradient in this backward is reduced with what its .grad holds (zero
  // after zero_grad, or what no_sync micro-steps accumulated), so that every rank still launches
  // every bucket (the alternative is a hang).
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    if (!m_ready[i]) {
      attach_gradient(i);
      m_ready[i] = true;
      m_buckets[m_bucket_of[i]]->pending -= 1;
    }
  }
  launch_ready_buckets();
  const bool compressed = m_powersgd && m_powersgd->compressing();
  wait_buckets(compressed);
  if (m_options.compression == GradCompression::fp16) {
    for (auto& bucket : m_buckets) {
      bucket->flat.copy_(bucket->wire);  // the gradients are views of `flat`
    }
  }
  const auto votes = m_buckets.back()->flat.narrow(0, m_vote_offset, 2).to(at::kFloat).cpu();
  m_stop_voted = votes[0].item<float>() > 0.0F;
  m_nonfinite_voted = votes[1].item<float>() > 0.0F;
  if (m_powersgd) {
    if (compressed && m_nonfinite_voted) {
      m_powersgd->reset();  // a NaN in an error or Q would stay there for the rest of the run
    }
    m_powersgd->end_step();  // synchronised steps only: no_sync micro-steps never get here
  }
}

void DistributedDataParallel::wait_buckets(bool compressed) {
  for (std::size_t i = 0; i < m_buckets.size(); ++i) {
    report_wait(i);
    if (compressed) {
      m_bytes_total += m_powersgd->exchange_q(i);  // PowerSGD's second round: Q
    } else {
      m_comm.wait(m_buckets[i]->collective);
    }
  }
  for (std::size_t i = 0; compressed && i < m_buckets.size(); ++i) {
    report_wait(i);
    m_powersgd->decompress(i);
  }
  if (m_beacon != nullptr) {
    m_beacon->bucket.store(-1, std::memory_order_relaxed);
    m_beacon->enter(Phase::backward);
  }
}

void DistributedDataParallel::report_wait(std::size_t bucket_index) {
  if (m_beacon != nullptr) {
    m_beacon->bucket.store(static_cast<int>(bucket_index), std::memory_order_relaxed);
    m_beacon->enter(Phase::comm_wait);
  }
}

void DistributedDataParallel::finish() {
  std::lock_guard lock(m_mutex);
  if (m_error) {
    auto error = m_error;
    m_error = nullptr;
    try {
      std::rethrow_exception(error);
    } catch (const util::Failure&) {
      throw;
    } catch (const std::exception& failure) {
      throw TrainError(fmt::format("gradient all-reduce failed: {}", failure.what()));
    }
  }
}

}  // namespace expctl::train
