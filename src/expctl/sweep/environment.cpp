#include "expctl/sweep/environment.hpp"

#include "expctl/env/fingerprint.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::sweep {

namespace {

env::Fingerprint parse(const nlohmann::json& fingerprint) {
  return env::Fingerprint::from_json(fingerprint, "this machine's fingerprint");
}

std::string hash_with_devices(env::Fingerprint fingerprint, const std::vector<std::string>& gpus) {
  const nlohmann::json* vars = fingerprint.find("env.vars");
  nlohmann::json updated = vars != nullptr && vars->is_object() ? *vars : nlohmann::json::object();
  updated["CUDA_VISIBLE_DEVICES"] = util::join(gpus, ",");
  fingerprint.set("env.vars", updated);
  return fingerprint.hash();
}

}  // namespace

const nlohmann::json& Fingerprints::of(const spec::Spec& spec) {
  const auto& profile = spec.env_profile_path();
  Key key{std::filesystem::absolute(spec.file()).parent_path().string(), spec.get_string("determinism"),
          profile ? profile->string() : ""};
  auto found = m_cache.find(key);
  if (found == m_cache.end()) {
    found = m_cache.emplace(std::move(key), m_collect(spec)).first;
  }
  return found->second;
}

std::set<std::string> accepted_environments(const nlohmann::json& fingerprint, std::span<const Slot> slots) {
  const env::Fingerprint parsed = parse(fingerprint);
  std::set<std::string> hashes{parsed.hash()};
  for (const Slot& slot : slots) {
    if (!slot.gpus.empty()) {
      hashes.insert(hash_with_devices(parsed, slot.gpus));
    }
  }
  return hashes;
}

int gpu_count(const nlohmann::json& fingerprint) {
  const env::Fingerprint parsed = parse(fingerprint);
  const nlohmann::json* count = parsed.find("gpu.count");
  return count != nullptr && count->is_number_integer() ? count->get<int>() : 0;
}

}  // namespace expctl::sweep
