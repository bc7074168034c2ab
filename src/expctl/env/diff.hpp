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

}  // namespace expctl::env
