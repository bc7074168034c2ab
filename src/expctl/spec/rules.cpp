#include "expctl/spec/rules.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "expctl/spec/convert.hpp"
#include "expctl/spec/field_table.hpp"

namespace expctl::spec {

namespace {

// Read access to resolved values by dotted path; every path here is a field of the table.
class Values {
 public:
  explicit Values(const nlohmann::json& values) : m_values(values) {}
  const nlohmann::json& at(std::string_view path) const {
    std::string pointer = "/" + std::string(path);
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    return m_values.at(nlohmann::json::json_pointer(pointer));
  }
  std::string text(std::string_view path) const { return at(path).get<std::string>(); }
  int64_t integer(std::string_view path) const { return at(path).get<int64_t>(); }
  double number(std::string_view path) const { return at(path).get<double>(); }
  bool flag(std::string_view path) const { return at(path).get<bool>(); }

 private:
  const nlohmann::json& m_values;
};

using Check = std::optional<std::string> (*)(const Values&);

struct Rule {
  std::vector<std::string_view> fields;
  Check check;
};

std::optional<std::string> epochs_or_steps(const Values& v) {
  if (v.integer("train.epochs") > 0 && v.integer("train.max_steps") > 0) {
    return "train.epochs and train.max_steps are both set: keep one of them";
  }
  return std::nullopt;
}

std::optional<std::string> fp16_needs_cuda(const Values& v) {
  if (v.flag("train.amp.enabled") && v.text("train.amp.dtype") == "fp16" && v.text("distributed.backend") == "gloo") {
    return "train.amp.dtype fp16 needs CUDA, but distributed.backend gloo is CPU-only: use train.amp.dtype bf16 "
           "or distributed.backend nccl";
  }
  return std::nullopt;
}

std::optional<std::string> nesterov_needs_momentum(const Values& v) {
  if (v.flag("optim.nesterov") && (v.text("optim.name") != "sgd" || v.number("optim.momentum") == 0.0)) {
    return "optim.nesterov needs optim.name sgd with optim.momentum > 0";
  }
  return std::nullopt;
}

std::optional<std::string> min_lr_below_lr(const Values& v) {
  if (v.text("schedule.name") == "cosine" && v.number("schedule.min_lr") > v.number("optim.lr")) {
    return fmt::format("schedule.min_lr ({}) must not exceed optim.lr ({})", v.number("schedule.min_lr"),
                       v.number("optim.lr"));
  }
  return std::nullopt;
}

std::optional<std::string> warmup_within_steps(const Values& v) {
  const int64_t max_steps = v.integer("train.max_steps");
  if (max_steps > 0 && v.integer("schedule.warmup_steps") >= max_steps) {
    return fmt::format("schedule.warmup_steps ({}) must be smaller than train.max_steps ({})",
                       v.integer("schedule.warmup_steps"), max_steps);
  }
  return std::nullopt;
}

std::optional<std::string> cnn_needs_image_shape(const Values& v) {
  if (v.text("data.dataset") == "synthetic" && v.text("model.arch") == "cnn" && v.at("data.input_shape").size() != 3) {
    return fmt::format("model.arch cnn needs data.input_shape [channels, height, width], found {} dimension(s)",
                       v.at("data.input_shape").size());
  }
  return std::nullopt;
}

std::optional<std::string> torchscript_needs_file(const Values& v) {
  const bool torchscript = v.text("model.arch") == "torchscript";
  if (torchscript && v.text("model.file").empty()) {
    return "model.arch torchscript needs model.file: the path of a torch.jit.script module saved with "
           "torch.jit.save (docs/models.md)";
  }
  if (!torchscript && !v.text("model.file").empty()) {
    return fmt::format("model.file is set but model.arch is {}: set model.arch torchscript to train that file",
                       v.text("model.arch"));
  }
  return std::nullopt;
}

constexpr std::string_view k_array_fields[] = {"data.train_inputs", "data.train_targets", "data.eval_inputs",
                                               "data.eval_targets"};

// A token stream is one file per split (data.train_inputs, data.eval_inputs): its targets are its
// next tokens, so target arrays are refused rather than ignored.
std::optional<std::string> tokens_need_streams(const Values& v) {
  std::vector<std::string> missing;
  for (const std::string_view field : {"data.train_inputs", "data.eval_inputs"}) {
    if (v.text(field).empty()) {
      missing.emplace_back(field);
    }
  }
  if (!missing.empty()) {
    return fmt::format(
        "data.dataset tokens needs {}: the token stream of each split (a 1-d .npy of int64, int32 or "
        "uint16 ids, or a raw uint16 .bin)",
        fmt::join(missing, ", "));
  }
  std::vector<std::string> stray;
  for (const std::string_view field : {"data.train_targets", "data.eval_targets"}) {
    if (!v.text(field).empty()) {
      stray.emplace_back(field);
    }
  }
  if (!stray.empty()) {
    return fmt::format("{} set but data.dataset is tokens: a token stream's targets are its next tokens; remove them",
                       fmt::join(stray, ", "));
  }
  return std::nullopt;
}

std::optional<std::string> npy_needs_arrays(const Values& v) {
  if (v.text("data.dataset") == "tokens") {
    return tokens_need_streams(v);
  }
  const bool arrays = v.text("data.dataset") == "npy";
  std::vector<std::string> missing;
  std::vector<std::string> stray;
  for (const std::string_view field : k_array_fields) {
    (v.text(field).empty() ? missing : stray).emplace_back(field);
  }
  if (arrays && !missing.empty()) {
    return fmt::format("data.dataset npy needs {}: the .npy files of the inputs and targets of both splits",
                       fmt::join(missing, ", "));
  }
  if (!arrays && !stray.empty()) {
    return fmt::format("{} set but data.dataset is {}: set data.dataset npy to train on these arrays",
                       fmt::join(stray, ", "), v.text("data.dataset"));
  }
  return std::nullopt;
}

// The image-folder fields that configure nothing for other data: set there, they are refused
// rather than silently ignored (mean and std, loader threads, the bad-image policy included).
constexpr std::string_view k_image_fields[] = {
    "data.train_dir", "data.eval_dir", "data.image_size", "data.mean", "data.std",
    "data.augment.random_resized_crop", "data.augment.random_crop_padding", "data.augment.hflip",
    "data.on_bad_image", "data.loader_threads", "data.prefetch_batches"};

std::optional<std::string> imagefolder_needs_folders(const Values& v) {
  const bool folders = v.text("data.dataset") == "imagefolder";
  if (folders) {
    std::vector<std::string> missing;
    for (const std::string_view field : {"data.train_dir", "data.eval_dir"}) {
      if (v.text(field).empty()) {
        missing.emplace_back(field);
      }
    }
    if (!missing.empty()) {
      return fmt::format("data.dataset imagefolder needs {}: folders with one sub-folder of JPEG or PNG files per "
                         "class (docs/data.md)",
                         fmt::join(missing, " and "));
    }
    for (const std::string_view field : {"data.mean", "data.std"}) {
      const auto count = v.at(field).size();
      if (count != 0 && count != 1 && count != 3) {
        return fmt::format("{} has {} values: give one per channel (R, G, B), or one for all three", field, count);
      }
    }
    return std::nullopt;
  }
  std::vector<std::string> stray;
  for (const std::string_view field : k_image_fields) {
    if (v.at(field) != default_value(*find_field(field))) {
      stray.emplace_back(field);
    }
  }
  if (!stray.empty()) {
    return fmt::format("{} set but data.dataset is {}: these configure image folders only (set data.dataset "
                       "imagefolder, or remove them)",
                       fmt::join(stray, ", "), v.text("data.dataset"));
  }
  return std::nullopt;
}

std::optional<std::string> block_size_for_tokens(const Values& v) {
  const bool tokens = v.text("data.dataset") == "tokens";
  if (tokens && v.integer("data.block_size") == 0) {
    return std::string(
        "data.dataset tokens needs data.block_size: the tokens of one window (the model's context "
        "length)");
  }
  if (!tokens && v.integer("data.block_size") != 0) {
    return fmt::format(
        "data.block_size set but data.dataset is {}: it configures token streams only (set "
        "data.dataset tokens, or remove it)",
        v.text("data.dataset"));
  }
  return std::nullopt;
}

std::optional<std::string> model_loss_needs_torchscript(const Values& v) {
  if (v.text("train.loss") == "model" && v.text("model.arch") != "torchscript") {
    return fmt::format("train.loss model needs a torchscript model whose forward(inputs, targets) returns the loss; "
                       "model.arch is {}",
                       v.text("model.arch"));
  }
  return std::nullopt;
}

// Restarting one node's ranks alone cannot restart a job of several nodes: every node's supervisor
// would have to agree on the restart and its checkpoint step. Slurm's requeue restarts the job.
std::optional<std::string> restarts_on_one_node(const Values& v) {
  if (v.integer("distributed.max_restarts") > 0 && v.integer("distributed.nnodes") > 1) {
    return fmt::format(
        "distributed.max_restarts ({}) restarts the ranks of one node, and this run has distributed.nnodes {}: set "
        "it to 0 and let Slurm requeue the job instead (`sbatch --requeue`, docs/slurm.md)",
        v.integer("distributed.max_restarts"), v.integer("distributed.nnodes"));
  }
  return std::nullopt;
}

const Rule k_rules[] = {
    {{"model.arch", "model.file"}, torchscript_needs_file},
    {{"data.dataset", "data.train_inputs", "data.train_targets", "data.eval_inputs", "data.eval_targets"},
     npy_needs_arrays},
    {{"data.dataset", "data.block_size"}, block_size_for_tokens},
    {{"train.loss", "model.arch"}, model_loss_needs_torchscript},
    {{"train.max_steps", "train.epochs"}, epochs_or_steps},
    {{"train.amp.dtype", "distributed.backend", "train.amp.enabled"}, fp16_needs_cuda},
    {{"optim.nesterov", "optim.momentum", "optim.name"}, nesterov_needs_momentum},
    {{"schedule.min_lr", "optim.lr", "schedule.name"}, min_lr_below_lr},
    {{"schedule.warmup_steps", "train.max_steps"}, warmup_within_steps},
    {{"distributed.max_restarts", "distributed.nnodes"}, restarts_on_one_node},
    {{"model.arch", "data.input_shape", "data.dataset"}, cnn_needs_image_shape},
    {{"data.dataset", "data.train_dir", "data.eval_dir", "data.image_size", "data.mean", "data.std",
      "data.augment.random_resized_crop", "data.augment.random_crop_padding", "data.augment.hflip", "data.on_bad_image",
      "data.loader_threads", "data.prefetch_batches"},
     imagefolder_needs_folders},
};

}  // namespace

std::vector<RuleViolation> check_rules(const nlohmann::json& values) {
  const Values view(values);
  std::vector<RuleViolation> violations;
  for (const Rule& rule : k_rules) {
    if (auto message = rule.check(view)) {
      violations.push_back({rule.fields, std::move(*message)});
    }
  }
  return violations;
}

}  // namespace expctl::spec
