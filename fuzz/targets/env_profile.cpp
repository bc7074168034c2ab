// fuzz_env_profile: a pinned-stack TOML profile (envs/*.toml), through both readers: the one
// `expctl verify`/`env` use (env::load_profile) and the one a spec's `env:` is hashed with
// (spec::load_profile).
#include "expctl/env/profile.hpp"
#include "expctl/spec/profile.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto file = fuzz::scratch() / "profile.toml";
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] { (void)env::load_profile(file); });
  fuzz::expect_only_user_errors([&] { (void)spec::load_profile(file, "profile.toml"); });
  return 0;
}
