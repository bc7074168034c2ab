// spec -> TrainerConfig (run/train_options.cpp): every field of the training sections reaches the
// trainer, and the spec's choice lists (spec/catalog.cpp) are the trainer's names.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <tuple>

#include "expctl/run/train_options.hpp"
#include "expctl/spec/catalog.hpp"
#include "expctl/spec/field_table.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/strings.hpp"
#include "support/test_support.hpp"

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
  for (const auto& dataset : spec::datasets()) {
    INFO(dataset.name);
    CHECK(train::dataset_name(train::parse_dataset_kind(std::string(dataset.name))) == dataset.name);
  }
  for (const auto& model : spec::models()) {
    INFO(model.name);
    CHECK(train::model_name(train::parse_model_kind(std::string(model.name))) == model.name);
  }
  for (const auto& loss : spec::losses()) {
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
  CHECK(trainer_datasets == names(spec::datasets()));
  CHECK(trainer_models == names(spec::models()));
  CHECK(trainer_losses == names(spec::losses()));
  CHECK(spec::find_field("data.dataset")->choices == spec::choice_list(spec::datasets()));
  CHECK(spec::find_field("model.arch")->choices == spec::choice_list(spec::models()));
  CHECK(spec::find_field("train.loss")->choices == spec::choice_list(spec::losses()));
}

TEST_CASE("train options: model.dense reaches the cnn (it was validated and hashed, but dropped)") {
  test::TempDir dir;
  std::ofstream(dir / "spec.yaml") << "model: {arch: cnn, dense: 128}\ntrain: {max_steps: 5}\n";
  const auto config = run::train_options(spec::load_spec(dir / "spec.yaml").values(), {});
  CHECK(config.model.dense == 128);
}
