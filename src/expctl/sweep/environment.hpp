#pragma once
/// The environment side of skip-if-done: which environment hashes count as "this machine".
///
/// A run records the fingerprint its `expctl run` collects. The sweep asks the same code for it
/// (sweep_run::prepare injects run::check_pinned_stack), once per distinct folder, determinism
/// setting and profile, so a sweep's notion of "done here" can never drift from what its runs
/// record. A slot on a GPU machine sets CUDA_VISIBLE_DEVICES, a hashed variable, so each slot's
/// variant of the fingerprint counts too: a point done in slot 1 is done for slot 0.

#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "expctl/spec/spec.hpp"
#include "expctl/sweep/slots.hpp"

namespace expctl::sweep {

/// The fingerprint (env::Fingerprint::to_json()) that `expctl run` of `spec` records on this machine.
using FingerprintFn = std::function<nlohmann::json(const spec::Spec&)>;

/// Fingerprints by what they depend on in a spec; each is collected once.
class Fingerprints {
 public:
  explicit Fingerprints(FingerprintFn collect) : m_collect(std::move(collect)) {}
  const nlohmann::json& of(const spec::Spec& spec);

 private:
  using Key = std::tuple<std::string, std::string, std::string>;
  FingerprintFn m_collect;
  std::map<Key, nlohmann::json> m_cache;
};

/// The hash of `fingerprint`, and its hash with each slot's CUDA_VISIBLE_DEVICES in env.vars.
std::set<std::string> accepted_environments(const nlohmann::json& fingerprint, std::span<const Slot> slots);

/// gpu.count of a fingerprint (0 when absent).
int gpu_count(const nlohmann::json& fingerprint);

}  // namespace expctl::sweep
