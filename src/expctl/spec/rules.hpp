#pragma once
/// Cross-field consistency rules: combinations of individually valid values that cannot work
/// together (e.g. fp16 autocast on the CPU-only gloo backend). One table in rules.cpp.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace expctl::spec {

/// A broken rule: the message, and the fields involved in the order the diagnostic should
/// prefer to point at (the first one the user set explicitly).
struct RuleViolation {
  std::vector<std::string_view> fields;
  std::string message;
};

/// Checks every rule against fully resolved `values` (defaults filled in).
std::vector<RuleViolation> check_rules(const nlohmann::json& values);

}  // namespace expctl::spec
