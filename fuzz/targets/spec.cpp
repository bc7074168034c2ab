// fuzz_spec: a spec file, as `expctl run/validate/hash SPEC` loads it (spec::load_spec).
#include "expctl/spec/spec.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto file = fuzz::scratch() / "spec.yaml";
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] { (void)spec::load_spec(file); });
  return 0;
}
