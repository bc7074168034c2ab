#include "expctl/train/model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "expctl/train/ddp.hpp"
#include "expctl/train/models.hpp"
#include "expctl/util/error.hpp"

namespace expctl::train {
namespace {

using util::TrainError;

// Module::load would `set_` each parameter onto the loaded storage, which detaches it from the
// gradient accumulator the DDP hooks are registered on: after a resume no bucket was ever
// all-reduced and the ranks trained apart. Copying the values in place keeps every parameter's
// identity (and its hooks); the archive layout is Module::save's (one nested archive per child).
void load_in_place(torch::nn::Module& module, torch::serialize::InputArchive& archive, const std::string& prefix) {
  torch::NoGradGuard no_grad;
  auto copy_into = [&](const std::string& key, at::Tensor& target, bool is_buffer) {
    at::Tensor loaded;
    archive.read(key, loaded, is_buffer);
    EXPCTL_CHECK(loaded.sizes() == target.sizes(), TrainError, "\"{}{}\" has shape {} in the checkpoint, {} in the model",
                 prefix, key, fmt::join(loaded.sizes(), "x"), fmt::join(target.sizes(), "x"));
    target.copy_(loaded);
  };
  for (auto& parameter : module.named_parameters(/*recurse=*/false)) {
    copy_into(parameter.key(), parameter.value(), false);
  }
  for (auto& buffer : module.named_buffers(/*recurse=*/false)) {
    copy_into(buffer.key(), buffer.value(), true);
  }
  for (const auto& child : module.named_children()) {
    if (child.value()->is_serializable()) {
      torch::serialize::InputArchive child_archive;
      archive.read(child.key(), child_archive);
      load_in_place(*child.value(), child_archive, prefix + child.key() + ".");
    }
  }
}

/// `mlp` and `cnn` (train/models.hpp) behind the Model interface.
class BuiltinModel final : public Model {
 public:
  explicit BuiltinModel(std::shared_ptr<ClassifierImpl> module, std::string name)
      : m_module(std::move(module)), m_name(std::move(name)) {}

  std::vector<at::Tensor> parameters() const override { return unique_parameters(*m_module); }
  std::vector<at::Tensor> buffers() const override { return m_module->buffers(/*recurse=*/true); }
  at::Tensor forward(const at::Tensor& inputs) override { return m_module->forward(inputs); }
  void train(bool on) override { m_module->train(on); }
  void to(const at::Device& device) override { m_module->to(device); }
  void save_state(torch::serialize::OutputArchive& archive) const override { m_module->save(archive); }
  void load_state(torch::serialize::InputArchive& archive) override { load_in_place(*m_module, archive, ""); }
  bool save_artifact(const std::filesystem::path&, const std::string&) const override { return false; }
  std::string describe() const override {
    return fmt::format("{} ({} parameters)", m_name, parameter_count(*m_module));
  }

 private:
  std::shared_ptr<ClassifierImpl> m_module;
  std::string m_name;
};

}  // namespace

at::Tensor Model::forward_loss(const at::Tensor&, const at::Tensor&) {
  throw TrainError(fmt::format("train.loss model needs a model whose forward(inputs, targets) returns the loss; {} "
                               "computes outputs only: use train.loss cross_entropy or mse",
                               describe()));
}

std::unique_ptr<Model> create_model(const ModelOptions& options, const ModelShape& shape) {
  if (options.kind == ModelKind::torchscript) {
    return load_torchscript(options.file);
  }
  auto built = options;
  built.input_shape = shape.sample;
  built.num_classes = shape.outputs;
  return std::make_unique<BuiltinModel>(make_model(built), model_name(options.kind));
}

}  // namespace expctl::train
