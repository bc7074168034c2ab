#include <catch2/catch.hpp>

#include "expctl/spec/convert.hpp"

using namespace expctl::spec;

namespace {

tl::expected<nlohmann::json, ConversionError> convert(const char* path, const std::string& yaml) {
  const auto doc = load_yaml(yaml, "t");
  REQUIRE(doc.diagnostics.empty());
  return convert_value(*find_field(path), doc.root);
}

std::string error_of(const char* path, const std::string& yaml) {
  const auto result = convert(path, yaml);
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

}  // namespace

TEST_CASE("convert: integers are strict: no quotes - no decimal point") {
  CHECK(convert("data.batch_size", "64")->get<int64_t>() == 64);
  CHECK(convert("data.batch_size", "+64")->is_number_integer());
  CHECK(error_of("data.batch_size", "\"64\"") ==
        "data.batch_size must be an integer, found the string \"64\" (write it without quotes)");
  CHECK(error_of("data.batch_size", "64.0") == "data.batch_size must be an integer, found \"64.0\"");
  CHECK(error_of("data.batch_size", "0x40") == "data.batch_size must be an integer, found \"0x40\"");
  CHECK(error_of("seed", "99999999999999999999") == "seed must be an integer, found 99999999999999999999 (too large)");
}

TEST_CASE("convert: floats accept integers and every spelling of one number") {
  const auto a = convert("optim.lr", "1e-3");
  const auto b = convert("optim.lr", "0.001");
  const auto c = convert("optim.lr", "0.0010");
  REQUIRE(a);
  CHECK(a->is_number_float());
  CHECK(*a == *b);
  CHECK(*b == *c);
  CHECK(convert("distributed.bucket_cap_mb", "64")->is_number_float());
  CHECK(*convert("distributed.bucket_cap_mb", "64") == *convert("distributed.bucket_cap_mb", "64.0"));
  CHECK(error_of("optim.lr", "abc") == "optim.lr must be a float, found \"abc\"");
  CHECK(error_of("optim.lr", "'0.1'") ==
        "optim.lr must be a float, found the string \"0.1\" (write it without quotes)");
  CHECK(error_of("optim.lr", ".inf") == "optim.lr must be a finite number, found .inf");
  CHECK(error_of("optim.lr", "1e999") == "optim.lr must be a finite float, found 1e999");
}

TEST_CASE("convert: negative zero is zero") {
  const auto value = convert("model.dropout", "-0.0");
  REQUIRE(value);
  CHECK_FALSE(std::signbit(value->get<double>()));
}

TEST_CASE("convert: ranges - with open and closed bounds named") {
  CHECK(error_of("optim.lr", "0") == "optim.lr must be > 0 and <= 10, found 0");
  CHECK(convert("optim.lr", "10"));
  CHECK(error_of("optim.momentum", "1") == "optim.momentum must be >= 0 and < 1, found 1");
  CHECK(error_of("train.grad_accum_steps", "0") == "train.grad_accum_steps must be between 1 and 1024, found 0");
  CHECK(error_of("schedule.min_lr", "-1") == "schedule.min_lr must be >= 0, found -1");
}

TEST_CASE("convert: booleans are true/false only") {
  CHECK(convert("data.shuffle", "false")->get<bool>() == false);
  CHECK(convert("data.shuffle", "True")->get<bool>() == true);
  CHECK(error_of("data.shuffle", "yes") == "data.shuffle must be true or false, found \"yes\"");
  CHECK(error_of("data.shuffle", "\"true\"") ==
        "data.shuffle must be true or false, found the string \"true\" (write it without quotes)");
}

TEST_CASE("convert: choices suggest the closest one") {
  CHECK(convert("distributed.backend", "'gloo'")->get<std::string>() == "gloo");
  CHECK(error_of("distributed.backend", "glo") ==
        "distributed.backend must be one of auto, gloo, nccl, found \"glo\" (did you mean \"gloo\"?)");
  CHECK(error_of("distributed.backend", "mpi") == "distributed.backend must be one of auto, gloo, nccl, found \"mpi\"");
}

TEST_CASE("convert: lists check size and each element - pointing at the element") {
  CHECK(*convert("model.hidden_sizes", "[512, 256, 128]") == nlohmann::json({512, 256, 128}));
  CHECK(error_of("optim.betas", "[0.9]") == "optim.betas must have exactly 2 items, found 1");
  const auto bad = convert("model.hidden_sizes", "- 1\n- x\n");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "model.hidden_sizes[1] must be an integer, found \"x\"");
  CHECK(bad.error().mark.line == 2);
  CHECK(error_of("model.hidden_sizes", "64") == "model.hidden_sizes must be a list of integers, found \"64\"");
  CHECK(*convert("tags", "[a, 'b', 3]") == nlohmann::json({"a", "b", "3"}));
}

TEST_CASE("convert: container images must be pinned by digest") {
  const std::string digest(64, 'a');
  CHECK(convert("container.image", "ghcr.io/acme/train@sha256:" + digest));
  CHECK(convert("container.image", "''")->get<std::string>().empty());
  CHECK_THAT(error_of("container.image", "ubuntu:22.04"),
             Catch::StartsWith("container.image must be pinned by digest"));
  CHECK_THAT(error_of("container.image", "x@sha256:" + std::string(63, 'a')), Catch::StartsWith("container.image"));
}

TEST_CASE("convert: regression thresholds are signed percentages or numbers") {
  CHECK(convert("regression.samples_per_sec", "-5%")->get<std::string>() == "-5%");
  CHECK(convert("regression.samples_per_sec", "\"+2.5%\"")->get<std::string>() == "+2.5%");
  CHECK(convert("regression.eval_accuracy", "-0.5")->get<double>() == -0.5);
  CHECK(convert("regression.eval_accuracy", "-0.5pp")->get<std::string>() == "-0.5pp");
  CHECK(convert("regression.samples_per_sec", "5%")->get<std::string>() == "5%");
  CHECK(error_of("regression.samples_per_sec", "5 %") ==
        "regression.samples_per_sec must be a percentage (\"-5%\"), percentage points (\"-0.5pp\") or a number, "
        "found \"5 %\"");
}

TEST_CASE("convert: empty values and wrong shapes are type errors") {
  CHECK(error_of("optim.lr", "~") == "optim.lr must be a float, found an empty value");
  CHECK(error_of("name", "{a: 1}") == "name must be a string, found a mapping");
}
