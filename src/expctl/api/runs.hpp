#pragma once
/// The JSON documents about runs that `expctl list` and `expctl show` print and `expctl serve`
/// answers: one builder per document, so the CLI and the server can never disagree.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/api/run_folder.hpp"
#include "expctl/compare/phases.hpp"
#include "expctl/store/store.hpp"

namespace expctl::api {

/// Version of every JSON document expctl prints; bump on an incompatible change of any shape.
inline constexpr int k_json_format_version = 1;

/// {"format_version": 1, "kind": kind}: the start of every JSON document.
nlohmann::json json_envelope(const std::string& kind);

/// A run as a JSON object with a stable shape (documented in docs/store.md): id, name, status,
/// spec_hash, environment_hash, started_at, ended_at, duration_s, exit_code, root_cause, run_dir,
/// tags, owner, heartbeat_at. Absent values are null.
nlohmann::json run_json(const store::RunRecord& run);

/// The store's location as documents name it: the SQLite file, or the server's location.
std::string store_label(const store::Store& db);

/// `list --format json` without its "node_lag" (a fact of the CLI's node): "database",
/// "store_bytes" (when `db` is open) and "runs". `database` names the store when `db` is null.
nlohmann::json list_document(const store::Store* db, const std::string& database,
                             const std::vector<store::RunRecord>& runs);

/// `list --format json --details`: list_document's runs each with "summary" (the runner's summary
/// object), and "spec_values" beside "runs": each listed spec hash's values (hashed values as
/// stored, a program run's without trainer sections), one stored spec read and written per hash,
/// not per run: what a table of many runs (expctl.runs() in Python, docs/analysis.md) needs in one call.
void add_list_details(const store::Store& db, nlohmann::json& document, const std::vector<store::RunRecord>& runs);

/// `show RUN --series NAME --format json`: every point of one metric, every rank, at full
/// resolution: {"run", "metric", "points": [{"rank", "step", "value"}, ...]} ordered by rank, step.
nlohmann::json series_document(const store::Store& db, const std::string& run_id, const std::string& metric);

/// Everything `show` prints about one run, read once.
struct RunDetails {
  store::RunRecord run;
  std::optional<store::SpecRecord> spec;
  std::optional<std::string> environment;
  std::vector<store::RankRecord> ranks;
  std::vector<store::ArtifactRecord> artifacts;
  std::vector<store::MetricSeriesInfo> metrics;
  std::vector<compare::RankPhases> phases;
  nlohmann::json values;     ///< the spec's values: resolved.json's "spec", else the canonical form's
  bool every_field = false;  ///< values holds every field (resolved.json), not only the hashed ones
};

/// The run `selector` names (compare::resolve_one; `command` names the asker in its errors), read
/// with every detail `show` prints.
RunDetails read_details(const store::Store& db, const std::string& selector, const std::string& command,
                        const FolderAccess& folder = {});

/// `show --format json` without its "shipped" field (a fact of the CLI's node).
nlohmann::json details_json(const RunDetails& details);

/// A stored spec's hashed values: its canonical form's "spec" without the sections that do not
/// apply (spec::applicable_values), or null when the form holds none.
nlohmann::json canonical_values(const store::SpecRecord& spec);

/// A stored JSON object, or `fallback` if the text is not one (the store only accepts objects).
nlohmann::json parse_object(const std::string& text, nlohmann::json fallback);

}  // namespace expctl::api
