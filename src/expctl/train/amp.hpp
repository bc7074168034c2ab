#pragma once
/// Automatic mixed precision: an autocast scope and a dynamic loss scaler, both behaving exactly
/// like Python's `torch.autocast` and `torch.cuda.amp.GradScaler`.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <optional>

#include "expctl/train/process_group.hpp"

namespace expctl::train {

/// Autocast for the lifetime of the object, on one device type (kCPU or kCUDA). Replicates
/// `torch.autocast.__enter__/__exit__`: saves the previous enabled flag, dtype and cache flag,
/// increments the nesting level; on exit decrements it, clears the cast cache when the outermost
/// scope ends (otherwise a weight updated in place is served from a stale low-precision copy),
/// and restores the saved state. Keep `optimizer.step()` and the GradScaler outside the scope.
class AutocastGuard {
 public:
  /// Throws TrainError (before changing any state) when `dtype` is not usable on `device`, e.g.
  /// float16 on the CPU with LibTorch 1.13.
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType m_device;
  bool m_previous_enabled;
  at::ScalarType m_previous_dtype;
  bool m_previous_cache_enabled;
};

/// Parses the spec's `amp.dtype` ("bf16", "fp16"); throws TrainError otherwise.
at::ScalarType parse_amp_dtype(const std::string& text);

/// GradScaler settings; defaults are PyTorch's.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

/// What a checkpoint stores (Python's GradScaler.state_dict()).
struct GradScalerState {
  float scale = 65536.0F;
  std::int32_t growth_tracker = 0;
  GradScalerOptions options;
};

/// Dynamic loss scaling. Per optimizer step:
///   scaler.scale(loss).backward(); [ddp.finish();] scaler.unscale(opt); [clip];
///   scaler.step(opt, &comm); scaler.update();
/// `step` skips the optimizer when any gradient is inf/NaN on ANY rank (the found-inf flag is
/// all-reduced), and `update` then multiplies the scale by `backoff_factor`; after
/// `growth_interval` clean steps in a row it multiplies it by `growth_factor` (unless that
/// overflows float32). ATen's fused kernels are used where they exist (CUDA; CPU from 2.3); on
/// older CPUs the same arithmetic is done by hand.
class GradScaler {
 public:
  /// Throws TrainError unless growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0.
  explicit GradScaler(GradScalerOptions options = {});

  /// `loss * scale` (a float32 0-dim factor, as in Python); `loss` unchanged when disabled.
  at::Tensor scale(const at::Tensor& loss) const;
  /// Divides the gradients of `optimizer`'s parameters by the scale (multiplies by the fp32
  /// rounding of the fp64 reciprocal) and records whether any is inf/NaN. At most once per step.
  void unscale(torch::optim::Optimizer& optimizer);
  /// Unscales if not done yet, agrees on found-inf with every rank of `communicator` (if given),
  /// and calls `optimizer.step()` unless an inf/NaN was found. Returns whether it stepped.
  bool step(torch::optim::Optimizer& optimizer, Communicator* communicator = nullptr);
  /// Adjusts the scale after `step` (backoff on inf, growth after the interval).
  void update();

  /// Current scale (1 when disabled); the value recorded per step.
  float get_scale() const { return m_options.enabled ? m_scale : 1.0F; }
  /// Clean steps since the last change of scale.
  std::int32_t growth_tracker() const { return m_growth_tracker; }
  bool enabled() const { return m_options.enabled; }

  /// Snapshot for checkpoints.
  GradScalerState state() const;
  /// Restores a snapshot (options included).
  void load_state(const GradScalerState& state);
  /// Writes the state under "grad_scaler/*" keys of a torch archive.
  void save(torch::serialize::OutputArchive& archive) const;
  /// Reads what `save` wrote; throws TrainError if keys are missing.
  void load(torch::serialize::InputArchive& archive);

 private:
  GradScalerOptions m_options;
  float m_scale;
  std::int32_t m_growth_tracker = 0;
  bool m_unscaled = false;
  bool m_found_inf_local = false;
  std::optional<bool> m_found_inf;  // agreed value, set by step(), consumed by update()
};

}  // namespace expctl::train
