#pragma once
/// The machine held against what a run expects: the spec's pinned stack and image before a run,
/// the run's recorded fingerprint before a resume.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/env/diff.hpp"
#include "expctl/env/verify.hpp"
#include "expctl/run/resolved_run.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/store/store.hpp"

namespace expctl::run {

/// The machine held against the spec's pinned stack and image pin.
struct StackCheck {
  nlohmann::json fingerprint;  ///< Fingerprint::to_json()
  std::string fingerprint_hash;
  std::vector<env::VerifyRow> rows;  ///< one per pin; empty when nothing is pinned
  /// The rows that do not hold.
  std::vector<env::VerifyRow> drifted() const;
};

/// Collects this machine's fingerprint and verifies the spec's profile and image pin.
StackCheck check_pinned_stack(const spec::Spec& spec);

/// Before a resume: this machine's fingerprint against the one `run` was recorded with (the
/// variables recorded then are recorded again). Returns the differing fields that enter the
/// fingerprint hash; empty when the stack is the same (or the run has no recorded fingerprint).
std::vector<env::DiffRow> resume_drift(const store::Store& store, const store::RunRecord& run,
                                       const ResolvedRun& resolved);

}  // namespace expctl::run
