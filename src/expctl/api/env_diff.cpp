#include "expctl/api/env_diff.hpp"

#include <filesystem>

#include "expctl/compare/selector.hpp"
#include "expctl/util/error.hpp"

namespace expctl::api {

namespace {

bool is_file_store(const std::string& location) {
  return store::parse_store_location(location).kind == store::StoreKind::sqlite;
}

// A saved JSON file when the argument names one, otherwise a run selector.
EnvDiffSide read_side(const std::string& source, const RunStore& runs) {
  const bool is_run = !std::filesystem::exists(source);
  return {source, is_run, is_run ? run_fingerprint(source, runs) : env::read_fingerprint_file(source)};
}

// With one side a run and the other a file, the file's fingerprint is made comparable with the
// run's (env::adopt_run_determinism, env::code_folder_hint); the notes say what was done.
std::string align_file_with_run(EnvDiffSide& a, EnvDiffSide& b) {
  if (a.is_run == b.is_run) {
    return "";
  }
  EnvDiffSide& taken = a.is_run ? b : a;
  const EnvDiffSide& run = a.is_run ? a : b;
  return env::adopt_run_determinism(taken.fingerprint, run.fingerprint, run.source) +
         env::code_folder_hint(taken.fingerprint, run.fingerprint);
}

}  // namespace

env::Fingerprint run_fingerprint(const std::string& selector, const RunStore& runs) {
  EXPCTL_CHECK(!is_file_store(runs.location) || std::filesystem::exists(runs.location), util::EnvError,
               "{}: neither a fingerprint file nor a run (no results database at {}): give a file saved with "
               "expctl env --format json > FILE, or a run id with --db",
               selector, runs.location);
  const store::Store store = runs.open();
  const store::RunRecord run = compare::resolve_one(store, selector, "env diff");
  EXPCTL_CHECK(run.environment_hash.has_value(), util::EnvError, "run {} has no recorded environment fingerprint",
               run.id);
  const std::optional<std::string> text = store.environment(*run.environment_hash);
  EXPCTL_CHECK(text.has_value(), util::EnvError, "run {}: environment {} is missing from {}", run.id,
               *run.environment_hash, runs.location);
  const nlohmann::json document = nlohmann::json::parse(*text, nullptr, false);
  EXPCTL_CHECK(!document.is_discarded(), util::EnvError, "run {}: the stored environment is not valid JSON", run.id);
  return env::Fingerprint::from_json(document, "run " + run.id);
}

EnvDiff diff_environments(const std::string& a, const std::string& b, const RunStore& runs) {
  EnvDiff diff{read_side(a, runs), read_side(b, runs), {}, false, ""};
  diff.notes = align_file_with_run(diff.a, diff.b);
  diff.rows = env::diff_fingerprints(diff.a.fingerprint, diff.b.fingerprint);
  diff.differ = env::any_hashed(diff.rows);
  return diff;
}

}  // namespace expctl::api
