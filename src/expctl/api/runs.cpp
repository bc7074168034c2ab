#include "expctl/api/runs.hpp"

#include "expctl/compare/selector.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/util/metric_names.hpp"

namespace expctl::api {

namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

/// The run's spec values as the run resolved them (run folder's resolved.json, every field with
/// defaults filled in); for a run without its folder, the stored canonical form's hashed fields.
/// A program run's values hold no trainer section (spec::applicable_values), whenever it was recorded.
void read_values(const store::Store& db, RunDetails& details, const FolderAccess& folder) {
  if (nlohmann::json spec = resolved_spec(db, details.run, folder); spec.is_object()) {
    details.values = spec::applicable_values(std::move(spec));
    details.every_field = true;
    return;
  }
  if (details.spec) {
    details.values = canonical_values(*details.spec);
  }
}

}  // namespace

nlohmann::json json_envelope(const std::string& kind) {
  return nlohmann::json{{"format_version", k_json_format_version}, {"kind", kind}};
}

nlohmann::json run_json(const store::RunRecord& run) {
  const auto duration = run.duration_seconds();
  nlohmann::json document{
      {"id", run.id},
      {"name", run.name},
      {"status", store::to_string(run.status)},
      {"spec_hash", run.spec_hash},
      {"environment_hash", or_null(run.environment_hash)},
      {"started_at", run.started_at},
      {"ended_at", or_null(run.ended_at)},
      {"duration_s", or_null(duration)},
      {"exit_code", or_null(run.exit_code)},
      {"root_cause", run.root_cause},
      {"run_dir", run.run_dir.string()},
      {"tags", run.tags},
      {"owner", or_null(run.owner)},
      {"heartbeat_at", or_null(run.heartbeat_at)},
  };
  // Steps the record lacks (run/summary.hpp), where the run has any: a list of runs says so too.
  if (run.summary_json.find(util::summary_key::missing_steps) != std::string::npos) {
    const auto summary = nlohmann::json::parse(run.summary_json, nullptr, /*allow_exceptions=*/false);
    if (summary.is_object() && summary.contains(util::summary_key::missing_steps)) {
      document[util::summary_key::missing_steps] = summary.at(util::summary_key::missing_steps);
    }
  }
  return document;
}

std::string store_label(const store::Store& db) {
  return db.path().empty() ? db.location() : db.path().string();
}

nlohmann::json list_document(const store::Store* db, const std::string& database,
                             const std::vector<store::RunRecord>& runs) {
  nlohmann::json document = json_envelope("list");
  document["database"] = db ? store_label(*db) : database;
  if (db) {
    document["store_bytes"] = {{"database", db->database_bytes()}, {"run_folders", db->folders_bytes()}};
  }
  document["runs"] = nlohmann::json::array();
  for (const store::RunRecord& run : runs) {
    document["runs"].push_back(run_json(run));
  }
  return document;
}

void add_list_details(const store::Store& db, nlohmann::json& document, const std::vector<store::RunRecord>& runs) {
  nlohmann::json values_of = nlohmann::json::object();  // spec hash -> values, each spec read once
  auto& listed = document.at("runs");
  for (std::size_t i = 0; i < runs.size() && i < listed.size(); ++i) {
    const store::RunRecord& run = runs[i];
    if (!values_of.contains(run.spec_hash)) {
      const auto spec = db.spec(run.spec_hash);
      nlohmann::json values = spec ? canonical_values(*spec) : nlohmann::json(nullptr);
      values_of[run.spec_hash] = values.is_object() ? std::move(values) : nlohmann::json::object();
    }
    listed[i]["summary"] = parse_object(run.summary_json, nlohmann::json::object());
  }
  document["spec_values"] = std::move(values_of);
}

nlohmann::json series_document(const store::Store& db, const std::string& run_id, const std::string& metric) {
  nlohmann::json document = json_envelope("series");
  document["run"] = run_id;
  document["metric"] = metric;
  nlohmann::json points = nlohmann::json::array();
  for (const store::MetricPoint& point : db.metrics(run_id, {.name = metric, .rank = std::nullopt})) {
    points.push_back({{"rank", point.rank}, {"step", point.step}, {"value", point.value}});  // NaN: null
  }
  document["points"] = std::move(points);
  return document;
}

nlohmann::json canonical_values(const store::SpecRecord& spec) {
  const nlohmann::json canonical = nlohmann::json::parse(spec.canonical, nullptr, false);
  if (canonical.is_object() && canonical.contains("spec") && canonical.at("spec").is_object()) {
    return spec::applicable_values(canonical.at("spec"));
  }
  return nullptr;
}

nlohmann::json parse_object(const std::string& text, nlohmann::json fallback) {
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : fallback;
}

RunDetails read_details(const store::Store& db, const std::string& selector, const std::string& command,
                        const FolderAccess& folder) {
  RunDetails details{compare::resolve_one(db, selector, command), {}, {}, {}, {}, {}, {}, {}, false};
  const store::RunRecord& run = details.run;
  details.spec = db.spec(run.spec_hash);
  if (run.environment_hash) {
    details.environment = db.environment(*run.environment_hash);
  }
  details.ranks = db.ranks(run.id);
  details.artifacts = db.artifacts(run.id);
  details.metrics = db.metric_series(run.id);
  details.phases =
      compare::run_phases(db, run.id, nlohmann::json::parse(run.summary_json, nullptr, /*allow_exceptions=*/false));
  read_values(db, details, folder);
  return details;
}

nlohmann::json details_json(const RunDetails& details) {
  nlohmann::json document = json_envelope("show");
  document["run"] = run_json(details.run);
  document["spec"] = {{"hash", details.run.spec_hash}, {"name", details.spec ? details.spec->name : ""}};
  if (details.values.is_object()) {
    document["spec"]["values"] = details.values;
  }
  document["summary"] = parse_object(details.run.summary_json, nlohmann::json::object());
  document["environment"] = details.environment ? parse_object(*details.environment, nullptr) : nullptr;
  document["ranks"] = nlohmann::json::array();
  for (const store::RankRecord& rank : details.ranks) {
    document["ranks"].push_back({{"rank", rank.rank},
                                 {"host", rank.host},
                                 {"pid", or_null(rank.pid)},
                                 {"environment_hash", or_null(rank.environment_hash)},
                                 {"status", store::to_string(rank.status)},
                                 {"exit_code", or_null(rank.exit_code)},
                                 {"signal", or_null(rank.signal)}});
  }
  document["phases"] = compare::phases_json(details.phases);
  document["artifacts"] = nlohmann::json::array();
  for (const store::ArtifactRecord& artifact : details.artifacts) {
    document["artifacts"].push_back(
        {{"path", artifact.path}, {"sha256", artifact.sha256}, {"size_bytes", artifact.size_bytes}});
  }
  document["metrics"] = nlohmann::json::array();
  for (const store::MetricSeriesInfo& series : details.metrics) {
    // NaN has no JSON spelling: nlohmann writes it as null.
    document["metrics"].push_back({{"name", series.name},
                                   {"points", series.points},
                                   {"ranks", series.ranks},
                                   {"first_rank", series.first_rank},
                                   {"first_step", series.first_step},
                                   {"first_value", series.first_value},
                                   {"last_step", series.last_step},
                                   {"last_value", series.last_value}});
  }
  return document;
}

}  // namespace expctl::api
