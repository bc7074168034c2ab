#pragma once
/// Holding a fingerprint against a pinned-stack profile and a spec's image pin. Pure functions:
/// `expctl verify` prints the rows, and the runner uses them to refuse a drifted machine or,
/// with --allow-drift, to record every drifted field on the run.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/env/fingerprint.hpp"
#include "expctl/env/profile.hpp"

namespace expctl::env {

/// One checked pin.
struct VerifyRow {
  std::string key;     ///< profile key ("libtorch.version"), or "spec container.image"
  std::string pinned;  ///< the pattern as written
  std::string actual;  ///< the fingerprint's value ("none" when absent or unset)
  bool ok = false;
};

/// One row per pin of `profile`, in file order.
std::vector<VerifyRow> verify_profile(const Profile& profile, const Fingerprint& fingerprint);

/// The row for a spec's `container.image` pin ("name@sha256:<hex>"): ok when the image the
/// process runs in (container.image_digest) has the same sha256 digest.
VerifyRow verify_image_pin(std::string_view pinned_image, const Fingerprint& fingerprint);

/// True when every row is ok (also for no rows: nothing pinned, nothing drifted).
bool all_ok(const std::vector<VerifyRow>& rows);

/// The table `expctl verify` prints: field, pinned, actual, ok ("ok" or "MISMATCH").
std::string render_verify_table(const std::vector<VerifyRow>& rows);

/// [{"field", "pinned", "actual", "ok"}...] for JSON output and the run record.
nlohmann::json verify_rows_json(const std::vector<VerifyRow>& rows);

/// "sha256:<hex>" out of "name@sha256:<hex>" or "sha256:<hex>"; empty when there is none.
std::string image_digest_part(std::string_view image);

}  // namespace expctl::env
