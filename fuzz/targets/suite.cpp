// fuzz_suite: a nightly suite file, as `expctl nightly SUITE` loads it (compare::load_suite).
#include "expctl/compare/suite.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto file = fuzz::scratch() / "suite.yaml";
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] { (void)compare::load_suite(file); });
  return 0;
}
