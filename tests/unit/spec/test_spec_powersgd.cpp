// The PowerSGD fields (distributed.powersgd_rank, distributed.powersgd_warmup_steps): validated by
// the field table, and hashed only when they differ from their defaults, so that adding them left
// the hash of every earlier spec as it was (the known-answer test in test_spec.cpp still holds).
#include <catch2/catch.hpp>

#include "expctl/spec/field_table.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/diagnostic.hpp"
#include "support/test_support.hpp"

namespace {

using namespace expctl::spec;
using expctl::test::TempDir;

std::string hash_of(const TempDir& dir, const std::string& yaml, std::vector<std::string> overrides = {}) {
  return load_spec(dir.write("s.yaml", yaml), LoadOptions{std::move(overrides)}).hash();
}

std::string report_of(const TempDir& dir, const std::string& yaml) {
  try {
    load_spec(dir.write("s.yaml", yaml), LoadOptions{});
  } catch (const expctl::util::DiagnosticError& error) {
    return error.report();
  }
  FAIL("expected a DiagnosticError");
  return {};
}

}  // namespace

TEST_CASE("spec powersgd: grad_compression accepts powersgd, with rank 1 and 10 warm-up steps by default") {
  const TempDir dir;
  const Spec spec = load_spec(dir.write("s.yaml", "distributed: {grad_compression: powersgd}\n"), LoadOptions{});
  CHECK(spec.get_string("distributed.grad_compression") == "powersgd");
  CHECK(spec.get_int("distributed.powersgd_rank") == 1);
  CHECK(spec.get_int("distributed.powersgd_warmup_steps") == 10);
  CHECK(find_field("distributed.powersgd_rank")->hashing == Hashing::hashed_unless_default);
  CHECK(find_field("distributed.powersgd_warmup_steps")->hashing == Hashing::hashed_unless_default);
}

TEST_CASE("spec powersgd: rank 0 and a negative warm-up are refused, naming the field and the range") {
  const TempDir dir;
  const std::string rank = report_of(dir, "distributed:\n  grad_compression: powersgd\n  powersgd_rank: 0\n");
  CHECK_THAT(rank, Catch::Contains(":3:18: distributed.powersgd_rank must be between 1 and 1024, found 0"));
  const std::string warmup = report_of(dir, "distributed: {powersgd_warmup_steps: -1}\n");
  CHECK_THAT(warmup, Catch::Contains("distributed.powersgd_warmup_steps must be between 0 and 1000000000, found -1"));
}

TEST_CASE("spec powersgd: the fields enter the hash only when they differ from their defaults") {
  const TempDir dir;
  const std::string base = hash_of(dir, "name: base\n");
  CHECK(hash_of(dir, "name: base\n", {"distributed.powersgd_rank=1", "distributed.powersgd_warmup_steps=10"}) == base);
  const std::string rank = hash_of(dir, "name: base\n", {"distributed.powersgd_rank=2"});
  const std::string warmup = hash_of(dir, "name: base\n", {"distributed.powersgd_warmup_steps=0"});
  CHECK(rank != base);
  CHECK(warmup != base);
  CHECK(rank != warmup);
  const std::string compressed = hash_of(dir, "distributed: {grad_compression: powersgd}\n");
  CHECK(compressed != hash_of(dir, "distributed: {grad_compression: powersgd, powersgd_rank: 4}\n"));
  const Spec spec = load_spec(dir.write("s.yaml", "distributed: {powersgd_rank: 4}\n"), LoadOptions{});
  CHECK_THAT(spec.canonical(), Catch::Contains("\"powersgd_rank\":4"));
  CHECK_THAT(spec.canonical(), !Catch::Contains("powersgd_warmup_steps"));
}
