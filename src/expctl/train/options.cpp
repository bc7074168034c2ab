#include "expctl/train/options.hpp"

#include <optional>
#include <vector>

#include <fmt/format.h>

#include "expctl/catalog/catalog.hpp"
#include "expctl/train/dataset_info.hpp"

// The spellings of every option the spec names, torch-free: the run module parses a spec into
// a TrainerConfig without loading the LibTorch plugin (train/plugin.hpp).

namespace expctl::train {
namespace {

using util::TrainError;

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

// The names of the spec's datasets; everything else about one is its catalog row.
constexpr Spelling<DatasetKind> k_datasets[] = {
    {DatasetKind::fashion_mnist, "fashion-mnist"},
    {DatasetKind::mnist, "mnist"},
    {DatasetKind::cifar10, "cifar10"},
    {DatasetKind::synthetic, "synthetic"},
    {DatasetKind::npy, "npy"},
    {DatasetKind::imagefolder, "imagefolder"},
    {DatasetKind::tokens, "tokens"},
};

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
  if (const auto kind = kind_named(k_datasets, text)) {
    return *kind;
  }
  std::string names;
  const auto rows = catalog::datasets();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == rows.size() ? " or " : ", ") + std::string(rows[i].name);
  }
  throw TrainError(fmt::format("unknown dataset \"{}\": use {}", text, names));
}

BadImagePolicy parse_bad_image_policy(const std::string& text) {
  if (text == "fail" || text == "skip") {
    return text == "fail" ? BadImagePolicy::fail : BadImagePolicy::skip;
  }
  throw TrainError(fmt::format("unknown data.on_bad_image \"{}\": use fail or skip", text));
}

const char* dataset_name(DatasetKind kind) {
  return name_of(k_datasets, kind, "dataset kind");
}

const catalog::DatasetInfo& dataset_info(DatasetKind kind) {
  const catalog::DatasetInfo* row = catalog::find_dataset(dataset_name(kind));
  EXPCTL_ASSERT(row != nullptr, "dataset {} has no catalog row", dataset_name(kind));
  return *row;
}

Normalization default_normalization(DatasetKind kind) {
  const catalog::DatasetInfo& row = dataset_info(kind);
  return {{row.mean.begin(), row.mean.end()}, {row.std.begin(), row.std.end()}};
}

std::filesystem::path default_dataset_root(DatasetKind kind) {
  return dataset_info(kind).default_root;
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
