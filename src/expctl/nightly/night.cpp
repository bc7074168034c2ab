// One night of a suite: plan, rounds, baselines, confirmation, grade. How a verdict is reached:
// docs/nightly.md.
#include "expctl/nightly/night.hpp"

#include <algorithm>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "expctl/compare/comparison.hpp"
#include "expctl/nightly/history.hpp"
#include "expctl/run/engine.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/atomic_file.hpp"
#include "expctl/util/error.hpp"

namespace expctl::nightly {
namespace {

using json = nlohmann::json;

constexpr size_t k_history_runs = 20;  // earlier runs per configuration behind the noise, as compare

/// One night of one suite: what every entry shares.
struct Night {
  const NightRequest& request;

  void progress(const std::string& line) const {
    if (request.progress) {
      request.progress(line);
    }
  }
  const std::string& date() const { return request.date; }
  store::Store open(store::OpenMode mode) const { return request.open_store(mode); }
};

/// An entry with its specs loaded and checked before anything runs.
struct Plan {
  const compare::SuiteEntry& entry;
  spec::Spec candidate;
  std::optional<spec::Spec> baseline;  ///< an A/B entry's baseline configuration

  std::string name() const { return candidate.get_string("name"); }
  compare::SuiteConfig candidate_config() const { return {entry.spec, entry.overrides}; }
};

Plan plan_entry(const compare::SuiteEntry& entry) {
  Plan plan{entry, spec::load_spec(entry.spec, spec::LoadOptions{entry.overrides}), std::nullopt};
  if (entry.baseline) {
    plan.baseline = spec::load_spec(entry.baseline->spec, spec::LoadOptions{entry.baseline->overrides});
    if (plan.baseline->hash() == plan.candidate.hash()) {
      throw util::CompareError(fmt::format(
          "{}.baseline: the same configuration as the entry (spec {}): drop `baseline:` to compare with the "
          "entry's earlier nights",
          entry.where, plan.candidate.hash().substr(0, 12)));
    }
  }
  compare::check_warn_thresholds(entry, plan.candidate.values());
  return plan;
}

// `rounds` rounds of (baseline, candidate) for an A/B entry, of the candidate alone otherwise.
std::string run_rounds(const Plan& plan, const Night& night, int rounds, std::string_view candidate_tag,
                       std::string_view baseline_tag, std::string_view what) {
  for (int round = 1; round <= rounds; ++round) {
    night.progress(fmt::format("{} {} {}/{}", plan.name(), what, round, rounds));
    if (plan.baseline) {
      const std::string error = night.request.launch(*plan.entry.baseline, {std::string(baseline_tag) + night.date()});
      if (!error.empty()) {
        return error;
      }
    }
    const std::string error = night.request.launch(
        plan.candidate_config(),
        {std::string(candidate_tag) + night.date(), std::string(k_entry_tag) + plan.entry.identity});
    if (!error.empty()) {
      return error;
    }
  }
  return {};
}

/// The runs of both sides.
struct Sides {
  std::vector<store::RunRecord> baseline;
  std::vector<store::RunRecord> candidate;
  std::string baseline_text;
  /// The baseline is the entry's own earlier runs (pinned or rolling), some of another spec hash
  /// than tonight's: its spec or a file it hashes changed since.
  bool spec_changed = false;
  std::vector<std::string> changes;  ///< what changed between the baseline and tonight
};

std::vector<store::RunRecord> runs_of(const store::Store& db, const spec::Spec& spec) {
  return db.list_runs({.spec_hash_prefix = spec.hash()});
}

// The entry's runs, newest first: those tagged with its identity, whatever their spec hash, and
// (nights recorded before entries had one) those of tonight's spec hash.
std::vector<store::RunRecord> entry_runs(const store::Store& db, const Plan& plan) {
  auto runs = db.list_runs({.tag = std::string(k_entry_tag) + plan.entry.identity});
  std::set<std::string> seen;
  for (const auto& run : runs) {
    seen.insert(run.id);
  }
  for (auto& run : runs_of(db, plan.candidate)) {
    if (!seen.contains(run.id)) {
      runs.push_back(std::move(run));
    }
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const store::RunRecord& a, const store::RunRecord& b) { return a.started_at > b.started_at; });
  return runs;
}

// Leaves of a JSON document as "a.b.c" -> value.
void flatten(const json& value, const std::string& prefix, std::map<std::string, json>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, item] : value.items()) {
      flatten(item, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else {
    out[prefix] = value;
  }
}

// The fingerprint fields that differ between two environments, at most `limit` named.
std::string environment_change(const std::string& before, const std::string& after, size_t limit = 4) {
  std::map<std::string, json> old_fields;
  std::map<std::string, json> new_fields;
  flatten(json::parse(before, nullptr, false), "", old_fields);
  flatten(json::parse(after, nullptr, false), "", new_fields);
  std::vector<std::string> differing;
  for (const auto& [field, value] : new_fields) {
    const auto old_value = old_fields.find(field);
    if (old_value == old_fields.end() || old_value->second != value) {
      differing.push_back(fmt::format("{} {} (was {})", field, value.dump(),
                                      old_value == old_fields.end() ? "absent" : old_value->second.dump()));
    }
  }
  for (const auto& [field, value] : old_fields) {
    if (!new_fields.contains(field)) {
      differing.push_back(field + " gone");
    }
  }
  if (differing.empty()) {
    return {};
  }
  const size_t shown = std::min(limit, differing.size());
  return fmt::format("environment: {} field(s) differ: {}{}", differing.size(),
                     fmt::join(differing.begin(), differing.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
                     differing.size() > shown ? "; ..." : "");
}

// What changed between the entry's baseline runs and tonight's: the hashed spec fields and files
// (against the newest baseline run of another spec hash), and the environment fingerprint.
void describe_changes(const store::Store& db, const Plan& plan, Sides& sides) {
  const auto other_spec = std::find_if(sides.baseline.begin(), sides.baseline.end(), [&](const store::RunRecord& run) {
    return run.spec_hash != plan.candidate.hash();
  });
  if (other_spec != sides.baseline.end()) {
    sides.spec_changed = true;
    if (const auto recorded = db.spec(other_spec->spec_hash)) {
      for (const auto& change : spec::canonical_changes(recorded->canonical, plan.candidate)) {
        sides.changes.push_back(change.text);
      }
    }
    if (sides.changes.empty()) {
      sides.changes.push_back(fmt::format("spec {} (the baseline's) is now {}", other_spec->spec_hash.substr(0, 12),
                                          plan.candidate.hash().substr(0, 12)));
    }
  }
  const auto environment_of = [&](const std::vector<store::RunRecord>& runs) -> std::optional<std::string> {
    for (const auto& run : runs) {
      if (run.environment_hash) {
        return db.environment(*run.environment_hash);
      }
    }
    return std::nullopt;
  };
  const auto before = environment_of(sides.baseline);
  const auto after = environment_of(sides.candidate);
  if (before && after && *before != *after) {
    if (auto text = environment_change(*before, *after); !text.empty()) {
      sides.changes.push_back(std::move(text));
    }
  }
}

std::string rolling_text(const std::vector<store::RunRecord>& runs) {
  const auto nights = nights_of(runs);
  if (nights.empty()) {
    return {};
  }
  return fmt::format("nightly {}{} ({} night{}, {} runs)", nights.back(),
                     nights.size() > 1 ? " to " + nights.front() : "", nights.size(), nights.size() == 1 ? "" : "s",
                     runs.size());
}

// The baseline: an A/B entry's runs of its baseline tonight; else the run tagged
// baseline:<name>; else the entry's runs of its last K nights that did not fail.
Sides first_sides(const store::Store& db, const Plan& plan, const std::string& date) {
  const auto own = runs_of(db, plan.candidate);
  Sides sides{{}, runs_of_night(own, k_night_tag, date), {}, false, {}};
  if (plan.baseline) {
    sides.baseline = runs_of_night(runs_of(db, *plan.baseline), k_night_baseline_tag, date);
    sides.baseline_text = fmt::format("tonight's runs of {} (A/B)", plan.entry.baseline->spec.filename().string());
    return sides;  // the two configurations differ by design: nothing "changed"
  }
  if (auto pinned = db.list_runs({.tag = "baseline:" + plan.name(), .limit = 1}); !pinned.empty()) {
    sides.baseline = std::move(pinned);
    sides.baseline_text = "tag baseline:" + plan.name();
  } else {
    sides.baseline = rolling_baseline(entry_runs(db, plan), date, plan.entry.baseline_nights);
    sides.baseline_text = rolling_text(sides.baseline);
  }
  if (!sides.baseline.empty() && !sides.candidate.empty()) {
    describe_changes(db, plan, sides);
  }
  return sides;
}

// The reruns: an A/B entry's interleaved pairs, else the candidate's reruns against the same baseline.
Sides confirmation_sides(const store::Store& db, const Plan& plan, const std::string& date, const Sides& first) {
  Sides sides{first.baseline,
              runs_of_night(runs_of(db, plan.candidate), k_confirm_tag, date),
              {},
              first.spec_changed,
              first.changes};
  if (plan.baseline) {
    sides.baseline = runs_of_night(runs_of(db, *plan.baseline), k_confirm_tag, date);
  }
  return sides;
}

std::string ids(const std::vector<store::RunRecord>& runs) {
  std::string text;
  for (const auto& run : runs) {
    text += (text.empty() ? "" : ",") + run.id;
  }
  return text;
}

/// Both sides loaded once, with the earlier runs behind the noise; compared under several thresholds.
struct Loaded {
  std::vector<compare::RunData> a;
  std::vector<compare::RunData> b;
  std::vector<compare::RunData> history;
};

Loaded load_sides(const store::Store& db, const Sides& sides) {
  Loaded loaded;
  std::tie(loaded.a, loaded.b) = compare::load_both(db, sides.baseline, sides.candidate);
  loaded.history = compare::load_history(db, loaded.a, loaded.b, {.limit = k_history_runs});
  return loaded;
}

compare::Comparison judge(const Loaded& loaded, const std::vector<compare::ThresholdOverride>& thresholds) {
  compare::CompareOptions options;
  options.thresholds = thresholds;
  compare::Comparison comparison = compare::compare_runs(loaded.a, loaded.b, options, loaded.history);
  label_suite_thresholds(comparison);
  return comparison;
}

// The warn view: the suite's fail thresholds with its warn thresholds over them.
std::optional<compare::Comparison> judge_warn(const Loaded& loaded, const compare::SuiteEntry& entry) {
  if (entry.warn.empty()) {
    return std::nullopt;
  }
  auto thresholds = entry.thresholds;
  thresholds.insert(thresholds.end(), entry.warn.begin(), entry.warn.end());
  return judge(loaded, thresholds);
}

std::string rerun_label(const Plan& plan) {
  return plan.baseline ? fmt::format("{} interleaved rounds with the baseline", plan.entry.confirm_rounds)
                       : fmt::format("{} reruns against the same baseline", plan.entry.confirm_rounds);
}

std::string rerun_ids(const Sides& sides, const Plan& plan) {
  return plan.baseline ? fmt::format("baseline {}; candidate {}", ids(sides.baseline), ids(sides.candidate))
                       : fmt::format("candidate {}", ids(sides.candidate));
}

// Runs (unless no_run) and judges the reruns of a suspected timing regression.
Confirmation confirm(const Plan& plan, const Night& night, const Sides& first, NightlyCase& item,
                     std::string& launch_error) {
  Confirmation confirmation{plan.entry.confirm_rounds, nullptr, {}, rerun_label(plan)};
  if (confirmation.rounds == 0 || !needs_confirmation(*item.comparison, first.spec_changed)) {
    return confirmation;
  }
  std::string error;
  if (!night.request.no_run) {
    night.progress(fmt::format("{}: suspected {}; confirming with {}", plan.name(), item.comparison->verdict_line(),
                               confirmation.label));
    error = run_rounds(plan, night, confirmation.rounds, k_confirm_tag, k_confirm_tag, "confirmation round");
  }
  const store::Store db = night.open(store::OpenMode::read_only);
  const Sides reruns = confirmation_sides(db, plan, night.date(), first);
  if (!error.empty() || reruns.candidate.empty() || reruns.baseline.empty()) {
    confirmation.missing = !error.empty() ? "the reruns did not complete: " + error
                                          : "no reruns of this night are recorded (--no-run launches none)";
    launch_error = launch_error.empty() ? error : launch_error;
    return confirmation;
  }
  item.confirmation = judge(load_sides(db, reruns), plan.entry.thresholds);
  item.confirmation_runs = rerun_ids(reruns, plan);
  confirmation.comparison = &*item.confirmation;
  return confirmation;
}

void tag_failed(const Night& night, const Sides& sides) {
  store::Store db = night.open(store::OpenMode::read_write);
  for (const auto& run : sides.candidate) {
    db.add_tag(run.id, std::string(k_failed_tag) + night.date());
  }
}

std::string no_baseline_text(const Plan& plan) {
  if (plan.baseline) {
    return "no completed run of the A/B baseline tonight";
  }
  return fmt::format("no baseline yet (no run tagged baseline:{} and no earlier nightly of entry {})", plan.name(),
                     plan.entry.identity);
}

/// One entry's night: what ran, what it was judged against, its grade.
struct EntryNight {
  NightlyCase item;
  std::string launch_error;
};

void grade_night(const Plan& plan, const Night& night, const Sides& sides, EntryNight& result) {
  const store::Store db = night.open(store::OpenMode::read_only);
  const Loaded loaded = load_sides(db, sides);
  result.item.comparison = judge(loaded, plan.entry.thresholds);
  const auto warn_view = judge_warn(loaded, plan.entry);
  const auto confirmation = confirm(plan, night, sides, result.item, result.launch_error);
  result.item.grade =
      grade_entry(*result.item.comparison, warn_view ? &*warn_view : nullptr, confirmation, sides.spec_changed);
}

EntryNight run_entry(const Plan& plan, const Night& night) {
  EntryNight result;
  result.item.spec = plan.name();
  if (!night.request.no_run) {
    result.launch_error = run_rounds(plan, night, plan.entry.repeats, k_night_tag, k_night_baseline_tag, "run");
  }
  const Sides sides = first_sides(night.open(store::OpenMode::read_only), plan, night.date());
  result.item.candidate = ids(sides.candidate);
  result.item.baseline = sides.baseline_text;
  result.item.changes = sides.changes;
  if (sides.candidate.empty()) {
    result.item.skipped = result.launch_error.empty()
                              ? fmt::format("no completed run tagged {}{}", k_night_tag, night.date())
                              : result.launch_error;
  } else if (sides.baseline.empty()) {
    result.item.skipped = no_baseline_text(plan);
  } else {
    grade_night(plan, night, sides, result);
    if (result.item.grade.grade == Grade::fail) {
      tag_failed(night, sides);
    }
  }
  return result;
}

}  // namespace

void check_date(const std::string& date) {
  const bool ok = date.size() == 10 && date[4] == '-' && date[7] == '-' &&
                  std::all_of(date.begin(), date.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); });
  if (!ok) {
    throw util::CompareError(fmt::format("--date {}: expected YYYY-MM-DD, e.g. 2026-11-30", date));
  }
}

std::string today_utc() {
  return fmt::format("{:%Y-%m-%d}", fmt::gmtime(std::time(nullptr)));
}

NightResult run_night(const compare::Suite& suite, const NightRequest& request) {
  check_date(request.date);
  const Night night{request};
  std::vector<Plan> plans;
  for (const auto& entry : suite.specs) {
    plans.push_back(plan_entry(entry));  // every spec checked before the first run
  }
  NightResult result;
  for (const auto& plan : plans) {
    EntryNight entry = run_entry(plan, night);
    result.launch_failed = result.launch_failed || !entry.launch_error.empty();
    result.cases.push_back(std::move(entry.item));
  }
  result.exit_code = night_exit(result.cases, result.launch_failed, request.fail_on_warn);
  return result;
}

util::ExitCode night_exit(const std::vector<NightlyCase>& cases, bool launch_failed, bool fail_on_warn) {
  const auto any = [&](auto&& predicate) { return std::any_of(cases.begin(), cases.end(), predicate); };
  const bool incomparable = any([](const NightlyCase& item) {
    return item.comparison && item.comparison->outcome == compare::Outcome::not_comparable;
  });
  const bool failed = any([](const NightlyCase& item) {
    return item.comparison && item.grade.grade == Grade::fail &&
           item.comparison->outcome != compare::Outcome::not_comparable;
  });
  const bool warned = any([](const NightlyCase& item) { return item.comparison && item.grade.grade == Grade::warn; });
  return failed                     ? util::ExitCode::mismatch
         : launch_failed            ? util::ExitCode::run_failed
         : incomparable             ? util::ExitCode::usage
         : (warned && fail_on_warn) ? util::ExitCode::mismatch
                                    : util::ExitCode::ok;
}

LaunchRun in_process_launcher(std::function<store::Store()> open_store, std::shared_ptr<run::RunObserver> observer,
                              run::RankStop* stop) {
  return [open_store = std::move(open_store), observer = std::move(observer), stop](
             const compare::SuiteConfig& config, const std::vector<std::string>& tags) {
#ifdef EXPCTL_WITH_TORCH_PROVIDER
    run::RunRequest request;
    request.spec_file = config.spec;
    request.overrides = config.overrides;
    request.tags = tags;
    request.open_store = open_store;
    request.observer = observer.get();
    request.stop = stop;
    try {
      const auto result = run::run_spec(request);
      if (!result.refusal.empty()) {
        return fmt::format("expctl run {}: {}", config.spec.string(), result.refusal);
      }
      if (result.exit_code != util::ExitCode::ok) {
        const std::string cause = result.run ? result.run->root_cause : std::string();
        return fmt::format("expctl run {} exited {}: {}", config.spec.string(), util::to_int(result.exit_code),
                           cause.substr(0, cause.find('\n')));
      }
      return std::string();
    } catch (const util::Failure& error) {
      return fmt::format("expctl run {} exited {}: {}", config.spec.string(), util::to_int(error.exit_code()),
                         error.what());
    }
#else
    (void)tags;
    (void)open_store;
    (void)observer;
    (void)stop;
    return fmt::format("expctl run {}: this expctl was built without LibTorch (EXPCTL_WITH_TORCH=OFF)",
                       config.spec.string());
#endif
  };
}

ReportPaths write_reports(const std::string& suite, const std::vector<NightlyCase>& cases, const std::string& date,
                          const std::string& junit, const std::string& summary) {
  ReportPaths paths{junit.empty() ? fmt::format("results/nightly-{}.xml", date) : junit,
                    summary.empty() ? fmt::format("results/nightly-{}.md", date) : summary};
  for (const auto& path : {paths.junit, paths.summary}) {
    std::filesystem::create_directories(std::filesystem::absolute(path).parent_path());
  }
  const auto write = [](const std::string& path, const std::string& text) {
    if (path == "-") {
      std::cout << text << std::flush;
    } else if (auto written = util::write_file_atomic(path, text); !written) {
      throw util::CompareError(fmt::format("{}: cannot write the report: {}", path, written.error().message),
                               util::ExitCode::run_failed);
    }
  };
  write(paths.junit, render_junit(suite, cases, date + "T00:00:00Z"));
  write(paths.summary, render_nightly_markdown(suite, cases, date));
  return paths;
}

}  // namespace expctl::nightly
