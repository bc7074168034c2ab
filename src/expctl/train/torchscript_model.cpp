// TorchScript modules (`torch.jit.script(model).save(path)`) trained from C++: the research behind
// each check is in ../shared/research/bring-your-own-model.md §1.
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/tensorexpr_fuser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/script.h>
#include <torch/version.h>

#include <fmt/format.h>

#include <unordered_set>

#include "expctl/train/model.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

// The input of each mode-dependent operator that says "training": a scripted module reads it
// from `self.training`; a traced one has the mode it was traced in as a constant.
struct ModeInput {
  const char* op;
  std::size_t index;
};
constexpr ModeInput k_mode_inputs[] = {
    {"aten::dropout", 2},        {"aten::dropout_", 2},      {"aten::feature_dropout", 2},
    {"aten::alpha_dropout", 2},  {"aten::batch_norm", 5},    {"aten::instance_norm", 5},
};

/// The first mode-dependent operator whose mode is a constant in `module`'s forward, or "".
std::string fixed_mode_op(const torch::jit::Module& module) {
  auto graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  for (const torch::jit::Node* node : graph->nodes()) {
    for (const auto& mode : k_mode_inputs) {
      if (node->kind() == c10::Symbol::fromQualString(mode.op) && node->inputs().size() > mode.index &&
          node->inputs()[mode.index]->node()->kind() == c10::prim::Constant) {
        return mode.op;
      }
    }
  }
  return "";
}

// The first line that says something (LibTorch's "Unknown builtin op" starts with an empty one).
std::string first_line(const std::string& text) {
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto end = std::min(text.find('\n', begin), text.size());
    if (text.find_first_not_of(" \t", begin) < end) {
      return text.substr(begin, end - begin);
    }
    begin = end + 1;
  }
  return text;
}

// Turns LibTorch's load errors into what the user did and what to do about it.
[[noreturn]] void explain_load_error(const std::filesystem::path& file, const std::string& what) {
  const std::string ours = fmt::format("LibTorch {}", TORCH_VERSION);
  if (what.find("failed finding central directory") != std::string::npos ||
      what.find("failed reading zip archive") != std::string::npos) {
    throw TrainError(fmt::format("{}: not a TorchScript file (not a zip archive): save the model with "
                                 "torch.jit.script(model).save(PATH) (docs/models.md)",
                                 file.string()));
  }
  if (what.find("maximum supported version") != std::string::npos ||
      what.find("Unknown builtin op") != std::string::npos || what.find("Unknown type name") != std::string::npos) {
    throw TrainError(fmt::format("{}: written by a newer PyTorch than this build's {} ({}): export the model with "
                                 "PyTorch {}.{} (on Debian 12: /usr/bin/python3 with python3-torch), or build "
                                 "expctl with a LibTorch as new as the PyTorch that wrote it (docs/gpu.md)",
                                 file.string(), ours, first_line(what), TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR));
  }
  if (what.find("constants.pkl") != std::string::npos || what.find("code/") != std::string::npos) {
    throw TrainError(fmt::format("{}: a torch.save file, not TorchScript: save the model with "
                                 "torch.jit.script(model).save(\"{}\") (docs/models.md)",
                                 file.string(), file.filename().string()));
  }
  throw TrainError(fmt::format("{}: {} cannot load it: {}", file.string(), ours, first_line(what)));
}

class TorchScriptModel final : public Model {
 public:
  TorchScriptModel(torch::jit::Module module, std::filesystem::path file)
      : m_module(std::move(module)), m_file(std::move(file)) {
    std::unordered_set<const c10::TensorImpl*> seen;
    for (const auto& parameter : m_module.parameters(/*recurse=*/true)) {
      if (parameter.requires_grad() && seen.insert(parameter.unsafeGetTensorImpl()).second) {
        m_parameters.push_back(parameter);
      }
    }
    for (const auto& buffer : m_module.buffers(/*recurse=*/true)) {
      m_buffers.push_back(buffer);
    }
  }

  std::vector<at::Tensor> parameters() const override { return m_parameters; }
  std::vector<at::Tensor> buffers() const override { return m_buffers; }

  at::Tensor forward(const at::Tensor& inputs) override {
    return tensor_of(m_module.forward({inputs}), "forward(inputs)");
  }
  at::Tensor forward_loss(const at::Tensor& inputs, const at::Tensor& targets) override {
    // forward(self, inputs, targets): a module whose forward takes the inputs only has no loss.
    if (m_module.get_method("forward").function().getSchema().arguments().size() < 3) {
      return Model::forward_loss(inputs, targets);
    }
    auto loss = tensor_of(m_module.forward({inputs, targets}), "forward(inputs, targets)");
    EXPCTL_CHECK(loss.numel() == 1, TrainError,
                 "{}: forward(inputs, targets) returned a tensor of {} elements; train.loss model needs the scalar "
                 "loss",
                 m_file.string(), loss.numel());
    return loss.reshape({});
  }

  void train(bool on) override { m_module.train(on); }
  void to(const at::Device& device) override {
    m_module.to(device);
    *this = TorchScriptModel(m_module, m_file);  // the tensors moved: collect them again
  }

  // Parameters and buffers by position (the order is the module's registration order, stable
  // across loads of one file); shapes are checked when loading.
  void save_state(torch::serialize::OutputArchive& archive) const override {
    for (std::size_t i = 0; i < m_parameters.size(); ++i) {
      archive.write(fmt::format("p{}", i), m_parameters[i]);
    }
    for (std::size_t i = 0; i < m_buffers.size(); ++i) {
      archive.write(fmt::format("b{}", i), m_buffers[i], /*is_buffer=*/true);
    }
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    torch::NoGradGuard no_grad;
    auto copy_into = [&](const std::string& key, at::Tensor& target, bool is_buffer) {
      at::Tensor loaded;
      archive.read(key, loaded, is_buffer);
      EXPCTL_CHECK(loaded.sizes() == target.sizes(), TrainError,
                   "tensor {} of {} has another shape in the checkpoint: was model.file replaced?", key,
                   m_file.string());
      target.copy_(loaded);
    };
    for (std::size_t i = 0; i < m_parameters.size(); ++i) {
      copy_into(fmt::format("p{}", i), m_parameters[i], false);
    }
    for (std::size_t i = 0; i < m_buffers.size(); ++i) {
      copy_into(fmt::format("b{}", i), m_buffers[i], true);
    }
  }

  bool save_artifact(const std::filesystem::path& path, const std::string& metadata) const override {
    const bool training = m_module.is_training();
    auto module = m_module;  // a handle: the same module
    module.eval();           // what a reader of the trained model expects
    try {
      module.save(path.string(), {{"expctl.json", metadata}});
    } catch (const c10::Error& error) {
      module.train(training);
      throw TrainError(fmt::format("{}: cannot write the trained model: {}", path.string(),
                                   first_line(error.what_without_backtrace())));
    }
    module.train(training);
    return true;
  }

  std::string describe() const override {
    std::int64_t count = 0;
    for (const auto& parameter : m_parameters) {
      count += parameter.numel();
    }
    return fmt::format("torchscript {} ({} parameters)", m_file.filename().string(), count);
  }

 private:
  at::Tensor tensor_of(const c10::IValue& value, const char* call) const {
    EXPCTL_CHECK(value.isTensor(), TrainError, "{}: {} returned {}, not a tensor: return the logits (or the loss) "
                 "as one tensor",
                 m_file.string(), call, value.tagKind());
    return value.toTensor();
  }

  torch::jit::Module m_module;
  std::filesystem::path m_file;
  std::vector<at::Tensor> m_parameters;
  std::vector<at::Tensor> m_buffers;
};

}  // namespace

std::unique_ptr<Model> load_torchscript(const std::filesystem::path& file) {
  std::error_code error;
  EXPCTL_CHECK(std::filesystem::is_regular_file(file, error), TrainError,
               "{}: no such file: model.file must name a TorchScript module (docs/models.md)", file.string());
  torch::jit::Module module;
  try {
    module = torch::jit::load(file.string());
  } catch (const c10::Error& load_error) {
    explain_load_error(file, load_error.what_without_backtrace());
  } catch (const std::exception& load_error) {
    explain_load_error(file, load_error.what());
  }
  EXPCTL_CHECK(module.find_method("forward").has_value(), TrainError,
               "{}: the module has no forward method: script an nn.Module with torch.jit.script", file.string());
  if (const std::string op = fixed_mode_op(module); !op.empty()) {
    throw TrainError(fmt::format("{}: its train/eval mode is fixed in the file ({} has a constant mode, as "
                                 "torch.jit.trace records it), so dropout or BatchNorm would behave the same in "
                                 "training and evaluation: save it with torch.jit.script(model) instead",
                                 file.string(), op));
  }
  module.train(true);
  auto model = std::make_unique<TorchScriptModel>(std::move(module), file);
  EXPCTL_CHECK(!model->parameters().empty(), TrainError,
               "{}: the module has no trainable parameters: it was frozen (torch.jit.freeze or "
               "optimize_for_inference) or every parameter has requires_grad=False; save the scripted module before "
               "freezing it",
               file.string());
  return model;
}

void apply_jit_policy(const JitPolicy& policy) {
  // getExecutorMode() picks the profiling executor over the legacy one, getProfilingMode() makes
  // it profile: both must be on for the profiling executor (LibTorch 1.13 and 2.x alike).
  torch::jit::getExecutorMode() = policy.profiling_executor;
  torch::jit::getProfilingMode() = policy.profiling_executor;
  torch::jit::setTensorExprFuserEnabled(policy.tensorexpr_fuser);
}

JitPolicy current_jit_policy() {
  return JitPolicy{.profiling_executor = torch::jit::getExecutorMode() && torch::jit::getProfilingMode(),
                   .tensorexpr_fuser = torch::jit::tensorExprFuserEnabled()};
}

}  // namespace expctl::train
