#include "expctl/launch/environment.hpp"

extern char** environ;

namespace expctl::launch {

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t eq = text.find('=');
    if (eq != std::string::npos) {
      env.emplace(text.substr(0, eq), text.substr(eq + 1));
    }
  }
  return env;
}

std::optional<std::string> lookup(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<std::string> merged_environment(const EnvMap& base, const EnvOverrides& overrides) {
  EnvMap merged = base;
  for (const auto& [name, value] : overrides) {
    if (value) {
      merged[name] = *value;
    } else {
      merged.erase(name);
    }
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [name, value] : merged) {
    out.push_back(name + "=" + value);
  }
  return out;
}

}  // namespace expctl::launch
