#pragma once
/// Environment variables as plain values, so launch decisions are pure functions of a map
/// (tests pass a map instead of mutating the test process's environment).

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace expctl::launch {

/// A process environment: name -> value.
using EnvMap = std::map<std::string, std::string>;

/// Changes applied on top of an inherited environment: a value sets, nullopt removes.
using EnvOverrides = std::map<std::string, std::optional<std::string>>;

/// A copy of this process's environment (`environ`).
EnvMap current_environment();

/// The value of `name` in `env`, or nullopt when it is unset.
std::optional<std::string> lookup(const EnvMap& env, const std::string& name);

/// `base` with `overrides` applied, as "NAME=value" strings ready for execve.
std::vector<std::string> merged_environment(const EnvMap& base, const EnvOverrides& overrides);

}  // namespace expctl::launch
