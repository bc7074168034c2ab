#pragma once
/// toml++ as expctl includes it, for the modules that link expctl_toml (header-only, nesting
/// limit 64: cmake/ExpctlDependencies.cmake). Keys nested deeper are refused before parsing
/// (toml_depth.hpp).
///
/// toml++ 3.3.0 asserts in parse_key() that a key starts with a key character, and then reports a
/// syntax error when it does not: `[#]` aborted every build without NDEBUG (asan, Debug, the fuzz
/// targets; found by fuzz_env_profile). Its assertions are off here, as in release builds.

#ifndef TOML_ASSERT
#define TOML_ASSERT(expr) static_cast<void>(0)
#endif
#include <toml++/toml.h>
