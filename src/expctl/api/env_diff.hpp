#pragma once
/// `expctl env diff A B` as a function: each side a fingerprint file saved with `expctl env
/// --format json` or a run of the results store (any selector that names one run), read, made
/// comparable (a fingerprint taken without a spec against a run: env/diff.hpp's notes) and
/// compared field by field. The CLI prints the rows, the notes and the verdict.

#include <functional>
#include <string>
#include <vector>

#include "expctl/env/diff.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/store/store.hpp"

namespace expctl::api {

/// The results store a side that is no file is looked up in.
struct RunStore {
  std::string location;                ///< as --db gave it (a SQLite file or a server), for messages
  std::function<store::Store()> open;  ///< opens it read-only
};

struct EnvDiffSide {
  std::string source;   ///< as given
  bool is_run = false;  ///< no file of that name: a run selector
  env::Fingerprint fingerprint;
};

struct EnvDiff {
  EnvDiffSide a;
  EnvDiffSide b;
  std::vector<env::DiffRow> rows;  ///< env::diff_fingerprints(a, b)
  bool differ = false;             ///< a hashed field differs (exit 3)
  std::string notes;               ///< lines ("note: ...\n") on how a file was compared with a run; may be empty
};

/// The fingerprint recorded for a run (its rank-0 environment). Throws util::EnvError when the
/// store does not exist, the run has none, or it is missing or not JSON; what
/// compare::resolve_one throws for a selector that names no single run.
env::Fingerprint run_fingerprint(const std::string& selector, const RunStore& runs);

/// Reads both sides (a) then (b) and compares them.
EnvDiff diff_environments(const std::string& a, const std::string& b, const RunStore& runs);

}  // namespace expctl::api
