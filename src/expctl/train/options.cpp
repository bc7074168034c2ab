#include "expctl/train/options.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

// The spellings of every option the spec names, torch-free: the run module parses a spec into
// a TrainerConfig without loading the LibTorch plugin (train/plugin.hpp).

namespace expctl::train {
namespace {

using util::TrainError;

struct DatasetEntry {
  DatasetKind kind;
  const char* name;
  const char* default_root;
  Normalization normalization;
};

const std::vector<DatasetEntry>& dataset_table() {
  static const std::vector<DatasetEntry> table = {
      {DatasetKind::fashion_mnist, "fashion-mnist", "/usr/share/datasets/fashion-mnist", {{0.2860F}, {0.3530F}}},
      {DatasetKind::mnist, "mnist", "/usr/share/datasets/mnist", {{0.1307F}, {0.3081F}}},
      {DatasetKind::cifar10,
       "cifar10",
       "/usr/share/datasets/cifar10",
       {{0.4914F, 0.4822F, 0.4465F}, {0.2470F, 0.2435F, 0.2616F}}},
      {DatasetKind::synthetic, "synthetic", "", {{0.0F}, {1.0F}}},
      {DatasetKind::npy, "npy", "", {{0.0F}, {1.0F}}},
      // ImageNet's, as torchvision's model zoo and most recipes use them; the spec's data.mean/std override.
      {DatasetKind::imagefolder, "imagefolder", "", {{0.485F, 0.456F, 0.406F}, {0.229F, 0.224F, 0.225F}}},
      {DatasetKind::tokens, "tokens", "", {{0.0F}, {1.0F}}},
  };
  return table;
}

const DatasetEntry& entry_for(DatasetKind kind) {
  for (const auto& entry : dataset_table()) {
    if (entry.kind == kind) {
      return entry;
    }
  }
  EXPCTL_ASSERT(false, "dataset kind {} missing from the table", static_cast<int>(kind));
}

// A spelling of an enum value; the tables below are searched both ways.
template <typename Kind>
struct Spelling {
  Kind kind;
  const char* name;
};

template <typename Kind, std::size_t N>
std::optional<Kind> kind_named(const Spelling<Kind> (&table)[N], const std::string& text) {
  for (const auto& entry : table) {
    if (text == entry.name) {
      return entry.kind;
    }
  }
  return std::nullopt;
}

template <typename Kind, std::size_t N>
const char* name_of(const Spelling<Kind> (&table)[N], Kind kind, const char* what) {
  for (const auto& entry : table) {
    if (entry.kind == kind) {
      return entry.name;
    }
  }
  EXPCTL_ASSERT(false, "{} {} missing from its table", what, static_cast<int>(kind));
}

constexpr Spelling<ModelKind> k_models[] = {
    {ModelKind::mlp, "mlp"},
    {ModelKind::cnn, "cnn"},
    {ModelKind::torchscript, "torchscript"},
};

constexpr Spelling<LossKind> k_losses[] = {
    {LossKind::cross_entropy, "cross_entropy"},
    {LossKind::mse, "mse"},
    {LossKind::model, "model"},
};

constexpr Spelling<ScheduleKind> k_schedules[] = {
    {ScheduleKind::constant, "constant"},
    {ScheduleKind::step, "step"},
    {ScheduleKind::cosine, "cosine"},
};

constexpr Spelling<BackendRequest> k_backend_names[] = {
    {BackendRequest::auto_select, "auto"},
    {BackendRequest::gloo, "gloo"},
    {BackendRequest::nccl, "nccl"},
};

}  // namespace

DatasetKind parse_dataset_kind(const std::string& text) {
  for (const auto& entry : dataset_table()) {
    if (text == entry.name) {
      return entry.kind;
    }
  }
  throw TrainError(fmt::format(
      "unknown dataset \"{}\": use fashion-mnist, mnist, cifar10, synthetic, npy, imagefolder or tokens", text));
}

BadImagePolicy parse_bad_image_policy(const std::string& text) {
  if (text == "fail" || text == "skip") {
    return text == "fail" ? BadImagePolicy::fail : BadImagePolicy::skip;
  }
  throw TrainError(fmt::format("unknown data.on_bad_image \"{}\": use fail or skip", text));
}

const char* dataset_name(DatasetKind kind) {
  return entry_for(kind).name;
}

Normalization default_normalization(DatasetKind kind) {
  return entry_for(kind).normalization;
}

std::filesystem::path default_dataset_root(DatasetKind kind) {
  return entry_for(kind).default_root;
}

GradCompression parse_grad_compression(const std::string& text) {
  if (text == "none" || text == "fp16") {
    return text == "none" ? GradCompression::none : GradCompression::fp16;
  }
  EXPCTL_CHECK(text == "powersgd", TrainError, "unknown grad_compression \"{}\": use none, fp16 or powersgd", text);
  return GradCompression::powersgd;
}

std::optional<JitPolicy> jit_policy(ModelKind model, bool amp) {
  if (model != ModelKind::torchscript) {
    return std::nullopt;
  }
  return JitPolicy{.profiling_executor = true, .tensorexpr_fuser = !amp};
}

ModelKind parse_model_kind(const std::string& text) {
  if (const auto kind = kind_named(k_models, text)) {
    return *kind;
  }
  throw TrainError(fmt::format("unknown model \"{}\": use mlp, cnn or torchscript", text));
}

const char* model_name(ModelKind kind) { return name_of(k_models, kind, "model kind"); }

LossKind parse_loss_kind(const std::string& text) {
  if (const auto kind = kind_named(k_losses, text)) {
    return *kind;
  }
  throw TrainError(fmt::format("unknown train.loss \"{}\": use cross_entropy, mse or model", text));
}

const char* loss_name(LossKind kind) { return name_of(k_losses, kind, "loss kind"); }

OptimizerKind parse_optimizer_kind(const std::string& text) {
  if (text == "sgd") {
    return OptimizerKind::sgd;
  }
  EXPCTL_CHECK(text == "adamw", TrainError, "unknown optimizer \"{}\": use sgd or adamw", text);
  return OptimizerKind::adamw;
}

ScheduleKind parse_schedule_kind(const std::string& text) {
  if (const auto kind = kind_named(k_schedules, text)) {
    return *kind;
  }
  throw TrainError(fmt::format("unknown lr schedule \"{}\": use constant, step or cosine", text));
}

const char* backend_name(Backend backend) {
  return backend == Backend::nccl ? "nccl" : "gloo";
}

BackendRequest parse_backend_request(const std::string& text) {
  if (const auto request = kind_named(k_backend_names, text)) {
    return *request;
  }
  throw TrainError(fmt::format("unknown distributed backend \"{}\": use auto, gloo or nccl", text));
}

AllreduceRequest parse_allreduce_request(const std::string& text) {
  EXPCTL_CHECK(text == "auto" || text == "gloo", TrainError,
               "unknown distributed.allreduce \"{}\": use auto (shared memory on a host) or gloo", text);
  return text == "gloo" ? AllreduceRequest::gloo : AllreduceRequest::auto_select;
}

NonFinitePolicy parse_nonfinite_policy(const std::string& text) {
  if (text == "fail" || text == "skip") {
    return text == "fail" ? NonFinitePolicy::fail : NonFinitePolicy::skip;
  }
  throw TrainError(fmt::format("train.nonfinite: unknown policy \"{}\" (expected fail or skip)", text));
}
}  // namespace expctl::train
