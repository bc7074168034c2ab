// spec -> TrainerConfig (run/train_options.cpp): every field of the training sections reaches the
// trainer, the spec's choice lists (catalog/catalog.cpp) are the trainer's names, and every
// column of a dataset's catalog row (root, training-set size, normalisation) is what the trainer
// uses.
#include <fstream>
#include <set>
#include <tuple>

#include "support/test_support.hpp"
#include <catch2/catch.hpp>

#include "expctl/catalog/catalog.hpp"
#include "expctl/run/train_options.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/train/dataset_info.hpp"
#include "expctl/train/worker.hpp"
#include "expctl/util/strings.hpp"

using namespace expctl;
using nlohmann::json;

namespace {

json pointer_value(const json& values, std::string_view path) {
  std::string pointer = "/" + std::string(path);
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  return values.at(json::json_pointer(pointer));
}

void set_value(json& values, std::string_view path, json value) {
  std::string pointer = "/" + std::string(path);
  std::replace(pointer.begin(), pointer.end(), '.', '/');
  values[json::json_pointer(pointer)] = std::move(value);
}

bool in_range(const spec::Range& range, double x) {
  return (range.min_open ? x > range.min : x >= range.min) && (range.max_open ? x < range.max : x <= range.max);
}

double other_number(const spec::Range& range, double current) {
  for (const double candidate : {current + 1.0, current * 0.5, current + 0.25, current - 1.0, current * 2.0}) {
    if (candidate != current && in_range(range, candidate)) {
      return candidate;
    }
  }
  FAIL("no other value in range for " << current);
  return current;
}

/// Another valid value of `field`, differing from `current`.
json alternate(const spec::Field& field, const json& current) {
  using T = spec::FieldType;
  switch (field.type) {
    case T::boolean:
      return !current.get<bool>();
    case T::integer:
      return static_cast<std::int64_t>(other_number(field.range, static_cast<double>(current.get<std::int64_t>())));
    case T::floating:
      return other_number(field.range, current.get<double>());
    case T::choice:
      for (const auto& choice : spec::choices_of(field)) {
        if (choice != current.get<std::string>()) {
          return choice;
        }
      }
      break;
    case T::string:
      return current.get<std::string>() + "/elsewhere";
    case T::integer_list: {
      auto list = current.get<std::vector<std::int64_t>>();
      list.empty() ? list.push_back(2) : void(list[0] += 1);
      return list;
    }
    case T::float_list: {
      auto list = current.get<std::vector<double>>();
      list.empty() ? list.push_back(other_number(field.range, 1.0)) : void(list[0] = other_number(field.range, list[0]));
      return list;
    }
    default:
      break;
  }
  FAIL("no alternate for " << field.path);
  return current;
}

/// What of a TrainerConfig the spec's training sections decide.
auto decided(const train::TrainerConfig& c) {
  return std::tie(c.seed, c.data, c.batch_size, c.shuffle, c.drop_last, c.model, c.loss, c.optim, c.schedule,
                  c.epochs, c.max_steps, c.grad_accum_steps, c.amp, c.amp_dtype, c.grad_clip_norm, c.nonfinite,
                  c.eval_every, c.checkpoint_every, c.checkpoint_every_s);
}

}  // namespace

TEST_CASE("train options: every model, data, optim, schedule and train field of the spec table reaches the trainer") {
  test::TempDir dir;
  std::ofstream(dir / "spec.yaml") << "train: {max_steps: 5}\n";
  const json base = spec::load_spec(dir / "spec.yaml").values();
  const auto reference = run::train_options(base, {});
  std::size_t checked = 0;
  for (const spec::Field& field : spec::fields()) {
    const std::string section = util::split(std::string(field.path), '.').front();
    if (section != "model" && section != "data" && section != "optim" && section != "schedule" && section != "train") {
      continue;
    }
    INFO(field.path << " is validated and documented but does not reach training (run/train_options.cpp)");
    json changed = base;
    set_value(changed, field.path, alternate(field, pointer_value(base, field.path)));
    const auto config = run::train_options(changed, {});
    CHECK(decided(config) != decided(reference));
    ++checked;
  }
  CHECK(checked >= 40);
}

TEST_CASE("train options: the spec's choice lists are the trainer's names, both ways") {
  for (const auto& dataset : catalog::datasets()) {
    INFO(dataset.name);
    CHECK(train::dataset_name(train::parse_dataset_kind(std::string(dataset.name))) == dataset.name);
  }
  for (const auto& model : catalog::models()) {
    INFO(model.name);
    CHECK(train::model_name(train::parse_model_kind(std::string(model.name))) == model.name);
  }
  for (const auto& loss : catalog::losses()) {
    INFO(loss.name);
    CHECK(train::loss_name(train::parse_loss_kind(std::string(loss.name))) == loss.name);
  }
  // Every enum value has its name in the catalog (a kind added to the trainer only is caught).
  const auto names = [](auto rows) {
    std::set<std::string> set;
    for (const auto& row : rows) {
      set.emplace(row.name);
    }
    return set;
  };
  std::set<std::string> trainer_datasets;
  std::set<std::string> trainer_models;
  std::set<std::string> trainer_losses;
  for (int value = 0; value < 16; ++value) {
    try {
      trainer_datasets.emplace(train::dataset_name(static_cast<train::DatasetKind>(value)));
    } catch (const util::InternalError&) {
    }
    try {
      trainer_models.emplace(train::model_name(static_cast<train::ModelKind>(value)));
    } catch (const util::InternalError&) {
    }
    try {
      trainer_losses.emplace(train::loss_name(static_cast<train::LossKind>(value)));
    } catch (const util::InternalError&) {
    }
  }
  CHECK(trainer_datasets == names(catalog::datasets()));
  CHECK(trainer_models == names(catalog::models()));
  CHECK(trainer_losses == names(catalog::losses()));
  CHECK(spec::find_field("data.dataset")->choices == catalog::choice_list(catalog::datasets()));
  CHECK(spec::find_field("model.arch")->choices == catalog::choice_list(catalog::models()));
  CHECK(spec::find_field("train.loss")->choices == catalog::choice_list(catalog::losses()));
}

TEST_CASE("train options: model.dense reaches the cnn (it was validated and hashed, but dropped)") {
  test::TempDir dir;
  std::ofstream(dir / "spec.yaml") << "model: {arch: cnn, dense: 128}\ntrain: {max_steps: 5}\n";
  const auto config = run::train_options(spec::load_spec(dir / "spec.yaml").values(), {});
  CHECK(config.model.dense == 128);
}

TEST_CASE("catalog: every column of a dataset's row reaches the trainer: root, training-set size, normalisation") {
  test::TempDir dir;
  std::size_t fixed = 0;
  for (const catalog::DatasetInfo& row : catalog::datasets()) {
    INFO(row.name);
    const train::DatasetKind kind = train::parse_dataset_kind(std::string(row.name));
    CHECK(&train::dataset_info(kind) == &row);
    CHECK(train::default_dataset_root(kind) == std::filesystem::path(row.default_root));
    const train::Normalization normalization = train::default_normalization(kind);
    CHECK(normalization.mean == std::vector<float>(row.mean.begin(), row.mean.end()));
    CHECK(normalization.std == std::vector<float>(row.std.begin(), row.std.end()));
    if (row.source != catalog::DataSource::packaged) {
      continue;
    }
    // A packaged set: its size is the row's, and a spec naming it (no root) trains from the row's
    // root, through the spec and its mapping.
    train::DatasetOptions data;
    data.kind = kind;
    CHECK(train::training_set_size(data) == row.train_samples);
    std::ofstream(dir / "spec.yaml") << "data: {dataset: " << row.name << "}\ntrain: {max_steps: 5}\n";
    const auto config = run::train_options(spec::load_spec(dir / "spec.yaml").values(), {});
    CHECK(config.data.kind == kind);
    CHECK(config.data.root == std::filesystem::path(row.default_root));
    ++fixed;
  }
  CHECK(fixed == 3);
}

TEST_CASE("catalog: a fixed set has its size, every set a normalisation of 1 or 3 channels") {
  for (const catalog::DatasetInfo& row : catalog::datasets()) {
    INFO(row.name);
    CHECK((row.source == catalog::DataSource::packaged) == (row.train_samples > 0));
    CHECK((row.source == catalog::DataSource::packaged) == !row.files.empty());
    CHECK((row.mean.size() == 1 || row.mean.size() == 3));
    CHECK(row.std.size() == row.mean.size());
    for (const float deviation : row.std) {
      CHECK(deviation > 0.0F);
    }
  }
  CHECK(catalog::find_dataset("cifar10")->mean.size() == 3);
  CHECK(catalog::find_dataset("nope") == nullptr);
}
