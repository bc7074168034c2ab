#include "expctl/api/cleanup.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/env/version_pattern.hpp"
#include "expctl/spec/resolved_file.hpp"
#include "expctl/util/display.hpp"

namespace expctl::api {

namespace {

constexpr std::int64_t k_compaction_pays_bytes = 4 << 20;

}  // namespace

std::string baseline_tag(const store::RunRecord& run) {
  for (const std::string& tag : run.tags) {
    if (tag.starts_with("baseline:")) {
      return tag;
    }
  }
  return "";
}

std::vector<Removal> remove_runs(store::Store& db, const std::vector<store::RunRecord>& runs, bool dry_run) {
  std::vector<Removal> removals;
  for (const store::RunRecord& run : runs) {
    Removal removal{
        "run", run.id,
        fmt::format("{}, {}, {} UTC", run.name, store::to_string(run.status), util::short_utc(run.started_at)), 0};
    removal.bytes = dry_run ? store::Store::bytes_under(run.run_dir) : db.remove_run(run.id);
    removals.push_back(std::move(removal));
  }
  return removals;
}

namespace {

// The spec's own `tags:` label every run of it (quickstart, mlp, ...): they protect nothing. The
// tags a run was given (--tag, ab:, sweep, nightly, drift:) do. Without the run's resolved.json
// every tag counts.
std::vector<std::string> spec_tags(const store::RunRecord& run) {
  const auto spec = spec::read_resolved_spec(run.run_dir / spec::k_resolved_file);
  std::vector<std::string> tags;
  if (spec && spec->contains("tags") && spec->at("tags").is_array()) {
    for (const auto& tag : spec->at("tags")) {
      if (tag.is_string()) {
        tags.push_back(tag.get<std::string>());
      }
    }
  }
  return tags;
}

bool keeps(const GcRequest& request, const store::RunRecord& run) {
  for (const std::string& tag : run.tags) {
    for (const std::string& pattern : request.keep_tags) {
      if (env::glob_match(pattern, tag)) {
        return true;
      }
    }
  }
  const auto labels = spec_tags(run);
  const bool tagged = std::any_of(run.tags.begin(), run.tags.end(), [&](const std::string& tag) {
    return !tag.starts_with("baseline:") && std::find(labels.begin(), labels.end(), tag) == labels.end();
  });
  return (!baseline_tag(run).empty() && !request.include_baselines) || (tagged && !request.include_tagged);
}

// Runs are removed only when an age or a status asks for them; running runs never.
std::vector<store::RunRecord> runs_to_remove(const store::Store& db, const GcRequest& request) {
  if (!request.older_than && request.statuses.empty()) {
    return {};
  }
  const auto& statuses = request.statuses;
  std::optional<store::Clock::time_point> before;
  if (request.older_than) {
    before = store::Clock::now() - *request.older_than;
  }
  std::vector<store::RunRecord> runs;
  for (store::RunRecord& run : db.list_runs()) {
    const bool status_matches = statuses.empty()
                                    ? store::has_ended(run.status)
                                    : std::find(statuses.begin(), statuses.end(), run.status) != statuses.end();
    const auto started = store::parse_utc(run.started_at);
    const bool old_enough = !before || (started && *started < *before);
    if (status_matches && old_enough && !keeps(request, run)) {
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

// Checkpoints exist to resume a run, and a completed run cannot be resumed: their files go, and
// so do their artifact rows (the trained model, model.pt, stays).
std::vector<Removal> remove_checkpoints(store::Store& db, const std::vector<store::RunRecord>& removed_runs,
                                        bool dry_run) {
  std::vector<Removal> removals;
  for (const store::RunRecord& run : db.list_runs({.status = store::RunStatus::completed})) {
    if (std::any_of(removed_runs.begin(), removed_runs.end(), [&](const auto& other) { return other.id == run.id; })) {
      continue;
    }
    const auto folder = run.run_dir / "checkpoints";
    std::error_code error;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
      files.push_back(entry.path());
    }
    if (files.empty()) {
      continue;
    }
    Removal removal{"checkpoints of", run.id, fmt::format("{} file(s)", files.size()), 0};
    for (const auto& file : files) {
      removal.bytes += store::Store::bytes_under(file);
      if (!dry_run) {
        std::filesystem::remove_all(file, error);
      }
    }
    if (!dry_run) {
      for (const auto& artifact : db.artifacts(run.id)) {
        if (artifact.path.starts_with("checkpoints/")) {
          db.remove_artifact(run.id, artifact.path);
        }
      }
      db.remeasure_folder(run.id);  // the size `list` prints remembers the folder as it is now
    }
    removals.push_back(std::move(removal));
  }
  return removals;
}

std::vector<Removal> remove_orphans(const store::Store& db, bool dry_run) {
  std::vector<Removal> removals;
  for (const auto& folder : db.orphaned_folders()) {
    Removal removal{"orphaned folder", folder.string(), "no run of the store owns it",
                    store::Store::bytes_under(folder)};
    if (!dry_run) {
      std::error_code error;
      std::filesystem::remove_all(folder, error);
      if (error) {
        removal.note = fmt::format("could not delete it: {}", error.message());
        removal.bytes = 0;
      }
    }
    removals.push_back(std::move(removal));
  }
  return removals;
}

}  // namespace

std::vector<Removal> collect_garbage(store::Store& db, const GcRequest& request) {
  const auto runs = runs_to_remove(db, request);
  std::vector<Removal> removals = remove_runs(db, runs, request.dry_run);
  if (!request.keep_checkpoints) {
    for (auto& removal : remove_checkpoints(db, runs, request.dry_run)) {
      removals.push_back(std::move(removal));
    }
  }
  for (auto& removal : remove_orphans(db, request.dry_run)) {
    removals.push_back(std::move(removal));
  }
  if (!request.dry_run) {
    db.remember_folder_sizes();  // runs from before schema v5: `list` then walks none of them
  }
  return removals;
}

Compaction compact_if_it_pays(store::Store& db, bool dry_run) {
  Compaction compaction;
  compaction.database_bytes = db.database_bytes();
  compaction.free_bytes = db.reclaimable_bytes();
  compaction.pays =
      compaction.free_bytes >= k_compaction_pays_bytes || compaction.free_bytes * 4 >= compaction.database_bytes;
  if (compaction.pays && !dry_run) {
    db.compact();
    compaction.compacted = true;
    compaction.compacted_bytes = db.database_bytes();
  }
  return compaction;
}

}  // namespace expctl::api
