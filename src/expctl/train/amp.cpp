#include "expctl/train/amp.hpp"

#include <cmath>
#include <map>

#include "expctl/train/compat.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

struct AmpDtypeName {
  const char* name;
  at::ScalarType dtype;
};
constexpr AmpDtypeName k_amp_dtypes[] = {
    {"bf16", at::kBFloat16},
    {"fp16", at::kHalf},
};

void check_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
  if (device == c10::DeviceType::CPU) {
    EXPCTL_CHECK(dtype == at::kBFloat16 || (compat::k_cpu_autocast_fp16 && dtype == at::kHalf), TrainError,
                 "CPU autocast with this LibTorch ({}) supports only bf16, not {}: set amp.dtype: bf16",
                 TORCH_VERSION, c10::toString(dtype));
  } else {
    EXPCTL_CHECK(dtype == at::kBFloat16 || dtype == at::kHalf, TrainError,
                 "CUDA autocast supports fp16 and bf16, not {}", c10::toString(dtype));
  }
}

std::vector<at::Tensor> gradients_of(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> grads;
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      if (param.grad().defined()) {
        grads.push_back(param.mutable_grad());
      }
    }
  }
  return grads;
}

// ATen's fused kernel: one pass per device over all gradients (CUDA; CPU from LibTorch 2.3).
bool unscale_fused(const std::vector<at::Tensor>& grads, float inv_scale) {
  std::map<std::string, std::vector<at::Tensor>> by_device;
  for (const auto& grad : grads) {
    by_device[grad.device().str()].push_back(grad);
  }
  bool found = false;
  for (auto& [device, group] : by_device) {
    const auto options = at::TensorOptions().dtype(at::kFloat).device(group.front().device());
    auto found_inf = at::zeros({}, options);
    auto inv = at::full({}, inv_scale, options);
    at::_amp_foreach_non_finite_check_and_unscale_(group, found_inf, inv);
    found = found || found_inf.item<float>() != 0.0F;
  }
  return found;
}

// The same arithmetic as the kernel, for CPUs without it: flag non-finite values, multiply by
// the fp32 reciprocal (skipped when it is exactly 1, like the kernel).
bool unscale_by_hand(const std::vector<at::Tensor>& grads, float inv_scale) {
  bool found = false;
  for (const auto& grad : grads) {
    found = found || !at::isfinite(grad).all().item<bool>();
    if (inv_scale != 1.0F) {
      grad.mul_(static_cast<double>(inv_scale));
    }
  }
  return found;
}

}  // namespace

AutocastGuard::AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled, bool cache_enabled)
    : m_device(device),
      m_previous_enabled(compat::autocast_enabled(device)),
      m_previous_dtype(compat::autocast_dtype(device)),
      m_previous_cache_enabled(at::autocast::is_autocast_cache_enabled()) {
  if (enabled) {
    check_autocast_dtype(device, dtype);
  }
  compat::set_autocast_enabled(device, enabled);
  if (enabled) {
    compat::set_autocast_dtype(device, dtype);
  }
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(cache_enabled);
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  compat::set_autocast_enabled(m_device, m_previous_enabled);
  compat::set_autocast_dtype(m_device, m_previous_dtype);
  at::autocast::set_autocast_cache_enabled(m_previous_cache_enabled);
}

at::ScalarType parse_amp_dtype(const std::string& text) {
  for (const auto& entry : k_amp_dtypes) {
    if (text == entry.name) {
      return entry.dtype;
    }
  }
  throw TrainError(fmt::format("unknown amp dtype \"{}\": use bf16 or fp16", text));
}

GradScaler::GradScaler(GradScalerOptions options)
    : m_options(options), m_scale(static_cast<float>(options.init_scale)) {
  EXPCTL_CHECK(options.growth_factor > 1.0, TrainError, "grad scaler growth_factor must be > 1, got {}",
               options.growth_factor);
  EXPCTL_CHECK(options.backoff_factor > 0.0 && options.backoff_factor < 1.0, TrainError,
               "grad scaler backoff_factor must be in (0, 1), got {}", options.backoff_factor);
  EXPCTL_CHECK(options.growth_interval > 0, TrainError, "grad scaler growth_interval must be > 0, got {}",
               options.growth_interval);
  EXPCTL_CHECK(std::isfinite(options.init_scale) && options.init_scale > 0.0, TrainError,
               "grad scaler init_scale must be a positive number, got {}", options.init_scale);
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  if (!m_options.enabled) {
    return loss;
  }
  return loss * at::full({}, m_scale, at::TensorOptions().dtype(at::kFloat).device(loss.device()));
}

void GradScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (!m_options.enabled) {
    return;
  }
  EXPCTL_ASSERT(!m_unscaled, "GradScaler::unscale called twice before update()");
  const auto grads = gradients_of(optimizer);
  for (const auto& grad : grads) {
    EXPCTL_CHECK(grad.scalar_type() != at::kHalf, TrainError,
                 "attempting to unscale float16 gradients: keep parameters in float32 under AMP");
  }
  // Python: "FP32 division can be imprecise for certain compile options, so we carry out the
  // reciprocal in FP64."
  const auto inv_scale = static_cast<float>(1.0 / static_cast<double>(m_scale));
  bool fused = compat::k_cpu_amp_kernels;
  for (const auto& grad : grads) {
    fused = fused || grad.is_cuda();
  }
  m_found_inf_local = fused ? unscale_fused(grads, inv_scale) : unscale_by_hand(grads, inv_scale);
  m_unscaled = true;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer, Communicator* communicator) {
  if (!m_options.enabled) {
    optimizer.step();
    return true;
  }
  if (!m_unscaled) {
    unscale(optimizer);
  }
  bool found = m_found_inf_local;
  if (communicator != nullptr && communicator->world_size() > 1) {
    // Every rank must take the same decision, even when only one rank's local gradients overflowed
    // (e.g. parameters outside DDP, or an inf introduced after the all-reduce).
    auto flag = at::full({}, found ? 1.0F : 0.0F, at::TensorOptions().dtype(at::kFloat))
                    .to(communicator->device());
    communicator->allreduce(flag, "allreduce of the grad scaler's found-inf flag");
    found = flag.item<float>() != 0.0F;
  }
  m_found_inf = found;
  if (!found) {
    optimizer.step();
  }
  return !found;
}

void GradScaler::update() {
  if (!m_options.enabled) {
    return;
  }
  EXPCTL_ASSERT(m_found_inf.has_value(), "GradScaler::update called without step()");
  // _amp_update_scale_'s rule, with its float32 rounding of each product.
  if (*m_found_inf) {
    m_scale = static_cast<float>(static_cast<double>(m_scale) * m_options.backoff_factor);
    m_growth_tracker = 0;
  } else if (m_growth_tracker + 1 == m_options.growth_interval) {
    const auto grown = static_cast<float>(static_cast<double>(m_scale) * m_options.growth_factor);
    if (std::isfinite(grown)) {
      m_scale = grown;  // never grow past float32's range into inf
    }
    m_growth_tracker = 0;
  } else {
    m_growth_tracker += 1;
  }
  m_found_inf.reset();
  m_unscaled = false;
  m_found_inf_local = false;
}

GradScalerState GradScaler::state() const {
  return GradScalerState{m_scale, m_growth_tracker, m_options};
}

void GradScaler::load_state(const GradScalerState& state) {
  *this = GradScaler(state.options);
  m_scale = state.scale;
  m_growth_tracker = state.growth_tracker;
}

void GradScaler::save(torch::serialize::OutputArchive& archive) const {
  const auto as_tensor = [](double value) { return at::full({}, value, at::kDouble); };
  archive.write("grad_scaler/scale", at::full({}, m_scale, at::kFloat));
  archive.write("grad_scaler/growth_tracker", at::full({}, m_growth_tracker, at::kInt));
  archive.write("grad_scaler/init_scale", as_tensor(m_options.init_scale));
  archive.write("grad_scaler/growth_factor", as_tensor(m_options.growth_factor));
  archive.write("grad_scaler/backoff_factor", as_tensor(m_options.backoff_factor));
  archive.write("grad_scaler/growth_interval", at::full({}, m_options.growth_interval, at::kLong));
  archive.write("grad_scaler/enabled", at::full({}, m_options.enabled ? 1 : 0, at::kLong));
}

void GradScaler::load(torch::serialize::InputArchive& archive) {
  const auto read = [&archive](const char* key) {
    at::Tensor value;
    EXPCTL_CHECK(archive.try_read(key, value), TrainError, "checkpoint has no \"{}\": it was not written by "
                 "this expctl's GradScaler",
                 key);
    return value;
  };
  GradScalerState state;
  state.scale = read("grad_scaler/scale").item<float>();
  state.growth_tracker = read("grad_scaler/growth_tracker").item<std::int32_t>();
  state.options.init_scale = read("grad_scaler/init_scale").item<double>();
  state.options.growth_factor = read("grad_scaler/growth_factor").item<double>();
  state.options.backoff_factor = read("grad_scaler/backoff_factor").item<double>();
  state.options.growth_interval = read("grad_scaler/growth_interval").item<std::int64_t>();
  state.options.enabled = read("grad_scaler/enabled").item<std::int64_t>() != 0;
  load_state(state);
}

}  // namespace expctl::train
