#pragma once
/// What the user brought, checked before anything runs: a spec with a model file or NumPy arrays
/// has them loaded in this process (through the training plugin), and one forward and backward
/// runs on two samples. A traced or frozen module, a `torch.save` pickle, a file from a newer
/// PyTorch, inputs the model rejects, targets beyond its outputs: each is an input error (exit 2)
/// with the model's own words, before a rank starts or the run is recorded.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "expctl/spec/spec.hpp"

namespace expctl::run {

/// Where a check's warning goes ("warning: ..."; the CLI prints it as "expctl: warning: ...").
using Warn = std::function<void(const std::string& text)>;

/// True when the spec trains something the user brought (model.arch torchscript or
/// data.dataset npy): only then is there something preflight_training can find.
bool needs_preflight(const spec::Spec& spec);

/// Checks the spec's model and data as described above; throws util::TrainError with exit code 2.
/// Starts with check_backend(spec); the model and data are checked only when needs_preflight().
/// `warn`: where check_sandbox's warning goes.
void preflight_training(const spec::Spec& spec, const Warn& warn);

/// What the sandbox mode ($EXPCTL_SANDBOX, `--sandbox`) asks of this machine, before anything
/// runs (docs/models.md#the-sandbox). Code the spec would run sandboxed (the built-in trainer's
/// model; a program with `program.sandbox: true`) on a kernel without Landlock: one warning to
/// `warn` says `what` ("the run", "the model check") is not sandboxed (auto; once a process), or
/// util::UsageError (exit 2) refuses it (require). A program without `program.sandbox` under
/// require is refused too, and so is a built-in run whose ranks an external launcher started
/// (`external_rank`: each trains in an `expctl run` that keeps its rights). off: nothing.
/// Returns what the run's summary records (util::summary_key::sandbox): "landlock ABI 7", "off",
/// "off (program.sandbox is false)" or "not sandboxed: <why>".
std::string check_sandbox(const nlohmann::json& values, std::string_view what, const Warn& warn,
                          bool external_rank = false);

/// `distributed.backend: nccl` needs a CUDA GPU: refused (util::UsageError, exit 2, one line with
/// the fix) on a machine without one, and when the spec's own env profile pins NCCL, the CUDA
/// runtime or LibTorch's CUDA to `none`, before anything is recorded. `gpu_count`: the machine's
/// (probed when nullopt). Specs that run a program choose their own backend and are not checked.
void check_backend(const spec::Spec& spec, std::optional<int> gpu_count = std::nullopt);

}  // namespace expctl::run
