#include <catch2/catch.hpp>

#include "expctl/spec/convert.hpp"
#include "expctl/spec/rules.hpp"

using namespace expctl::spec;

namespace {

nlohmann::json defaults() {
  nlohmann::json values = nlohmann::json::object();
  for (const Field& field : fields()) {
    std::string pointer = "/" + std::string(field.path);
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    values[nlohmann::json::json_pointer(pointer)] = default_value(field);
  }
  return values;
}

std::vector<std::string> messages(const nlohmann::json& values) {
  std::vector<std::string> out;
  for (const auto& violation : check_rules(values)) {
    out.push_back(violation.message);
  }
  return out;
}

}  // namespace

TEST_CASE("rules: the defaults are consistent") {
  CHECK(check_rules(defaults()).empty());
}

TEST_CASE("rules: epochs and max_steps together") {
  auto values = defaults();
  values["train"]["epochs"] = 2;
  values["train"]["max_steps"] = 10;
  const auto violations = check_rules(values);
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].message == "train.epochs and train.max_steps are both set: keep one of them");
  CHECK(violations[0].fields.front() == "train.max_steps");
}

TEST_CASE("rules: fp16 autocast needs CUDA - bf16 or an undecided backend is fine") {
  auto values = defaults();
  values["train"]["amp"] = {{"enabled", true}, {"dtype", "fp16"}};
  CHECK(check_rules(values).empty());  // backend auto
  values["distributed"]["backend"] = "gloo";
  REQUIRE(messages(values).size() == 1);
  CHECK_THAT(messages(values)[0], Catch::StartsWith("train.amp.dtype fp16 needs CUDA"));
  values["train"]["amp"]["enabled"] = false;
  CHECK(check_rules(values).empty());
}

TEST_CASE("rules: nesterov needs sgd with momentum") {
  auto values = defaults();
  values["optim"]["nesterov"] = true;
  CHECK(check_rules(values).empty());
  values["optim"]["momentum"] = 0.0;
  CHECK(messages(values) == std::vector<std::string>{"optim.nesterov needs optim.name sgd with optim.momentum > 0"});
}

TEST_CASE("rules: cosine min_lr and warm-up length") {
  auto values = defaults();
  values["schedule"]["name"] = "cosine";
  values["schedule"]["min_lr"] = 0.5;
  values["schedule"]["warmup_steps"] = 10;
  values["train"]["max_steps"] = 10;
  CHECK(messages(values) ==
        std::vector<std::string>{"schedule.min_lr (0.5) must not exceed optim.lr (0.01)",
                                 "schedule.warmup_steps (10) must be smaller than train.max_steps (10)"});
}

TEST_CASE("rules: a synthetic CNN needs an image shape") {
  auto values = defaults();
  values["data"]["dataset"] = "synthetic";
  values["model"]["arch"] = "cnn";
  CHECK(check_rules(values).empty());
  values["data"]["input_shape"] = {784};
  CHECK(messages(values) ==
        std::vector<std::string>{
            "model.arch cnn needs data.input_shape [channels, height, width], found 1 dimension(s)"});
}
