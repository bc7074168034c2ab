#pragma once
/// Field-by-field difference of two fingerprints (`expctl env diff A B`).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/env/fingerprint.hpp"

namespace expctl::env {

/// One differing value. Map fields differ per entry ("env.vars.OMP_NUM_THREADS"), the
/// untracked-file manifest per path ("code.untracked[data/x.csv]"), other fields as a whole.
struct DiffRow {
  std::string group;    ///< "host"
  std::string field;    ///< "host.kernel", "env.vars.OMP_NUM_THREADS"
  std::string left;     ///< display text; "unset" when A lacks it
  std::string right;    ///< display text; "unset" when B lacks it
  bool hashed = false;  ///< a difference here makes the fingerprint hashes differ
};

/// Every difference, grouped in the field table's group order, fields in table order
/// (fields this expctl doesn't know come last in their group, by name).
std::vector<DiffRow> diff_fingerprints(const Fingerprint& left, const Fingerprint& right);

/// True when a row differs in a hashed field: the exit-3 condition of `expctl env diff`.
bool any_hashed(const std::vector<DiffRow>& rows);

/// The table `expctl env diff` prints (field, A, B, hashed), grouped with a heading per group.
std::string render_diff(const std::vector<DiffRow>& rows, const std::string& left_name, const std::string& right_name);

/// [{"group", "field", "a", "b", "hashed"}...].
nlohmann::json diff_rows_json(const std::vector<DiffRow>& rows);

/// A fingerprint file saved with `expctl env --format json > FILE`. Throws util::EnvError naming
/// `source` when it cannot be read or is not a fingerprint.
Fingerprint read_fingerprint_file(const std::string& source);

/// A fingerprint that `expctl env` took has no spec behind it: its determinism group holds this
/// process's defaults (no seed), while a run's holds what its spec set. Against a run, such a
/// fingerprint is compared with the run's determinism settings, which are the spec's and not the
/// machine's, so that "is this the machine that run used?" gets its answer. Sets them in `taken`
/// and returns the note that says so ("note: ...\n"), or "" when nothing was adopted.
std::string adopt_run_determinism(Fingerprint& taken, const Fingerprint& run, const std::string& run_source);

/// Where the two fingerprints recorded different folders' code state, the note that says which
/// folder to take this machine's fingerprint in (a run records the git state of its spec's
/// folder), or "".
std::string code_folder_hint(const Fingerprint& taken, const Fingerprint& run);

}  // namespace expctl::env
