// `expctl nightly SUITE.yaml`: runs every entry of a suite (`repeat` runs, tagged nightly:<date>),
// compares each with its baseline (an A/B entry's baseline runs tonight, else the pinned run
// tagged baseline:<spec name>, else the entry's runs of its last K nights), reruns a suspected
// timing regression before it may fail the night, grades each entry pass / warn / fail and writes
// a JUnit XML file and a Markdown summary for CI. How a verdict is reached: docs/nightly.md.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "expctl/cli/command.hpp"
#include "expctl/cli/support_compare.hpp"
#include "expctl/cli/support_store.hpp"
#include "expctl/compare/suite.hpp"
#include "expctl/report/report.hpp"
#include "expctl/spec/spec.hpp"
#include "expctl/util/error.hpp"
#ifdef EXPCTL_WITH_TORCH_PROVIDER
#include "expctl/cli/support_result.hpp"
#endif

namespace expctl::cli {
namespace {

using compare::Grade;

constexpr size_t k_history_runs = 20;  // earlier runs per configuration behind the noise, as compare

struct NightlyOptions {
  std::string suite;
  std::string date;  ///< YYYY-MM-DD; default: today (UTC)
  std::string junit;
  std::string summary;
  bool no_run = false;
  bool fail_on_warn = false;
  std::vector<std::string> thresholds;  ///< refused: thresholds live in versioned files
};

// Nights compare as text (the previous night is the greatest earlier date), so only one spelling.
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

void refuse_threshold_flags(const NightlyOptions& options) {
  if (!options.thresholds.empty()) {
    throw util::UsageError(fmt::format(
        "--threshold {}: nightly thresholds live in versioned files only, so a night's verdict can be reproduced "
        "from the repository: put it in the suite entry's `thresholds:` (or `warn:`) or the spec's `regression:` block",
        options.thresholds.front()));
  }
}

/// One night of one suite: what every entry shares.
struct Night {
  std::string date;
  bool no_run = false;
  const GlobalOptions& globals;

  void progress(const std::string& line) const {
    if (!globals.quiet) {
      std::cerr << "nightly: " << line << '\n';
    }
  }
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

// Runs one configuration in-process through the run engine, exactly as `expctl run` records any
// other run. Returns an error text, empty on success.
std::string launch_run(const GlobalOptions& globals, const compare::SuiteConfig& config, const std::string& tag) {
#ifdef EXPCTL_WITH_TORCH_PROVIDER
  run::RunRequest request;
  request.spec_file = config.spec;
  request.overrides = config.overrides;
  request.tags = {tag};
  request.open_store = store_opener(globals);
  request.quiet = true;
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
    return {};
  } catch (const util::Failure& error) {
    return fmt::format("expctl run {} exited {}: {}", config.spec.string(), util::to_int(error.exit_code()),
                       error.what());
  }
#else
  (void)globals;
  (void)tag;
  return fmt::format("expctl run {}: this expctl was built without LibTorch (EXPCTL_WITH_TORCH=OFF)",
                     config.spec.string());
#endif
}

// `rounds` rounds of (baseline, candidate) for an A/B entry, of the candidate alone otherwise.
std::string run_rounds(const Plan& plan, const Night& night, int rounds, std::string_view candidate_tag,
                       std::string_view baseline_tag, std::string_view what) {
  for (int round = 1; round <= rounds; ++round) {
    night.progress(fmt::format("{} {} {}/{}", plan.name(), what, round, rounds));
    if (plan.baseline) {
      const std::string error = launch_run(night.globals, *plan.entry.baseline, std::string(baseline_tag) + night.date);
      if (!error.empty()) {
        return error;
      }
    }
    const std::string error =
        launch_run(night.globals, plan.candidate_config(), std::string(candidate_tag) + night.date);
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
};

std::vector<store::RunRecord> runs_of(const store::Store& db, const spec::Spec& spec) {
  return db.list_runs({.spec_hash_prefix = spec.hash()});
}

std::string rolling_text(const std::vector<store::RunRecord>& runs) {
  const auto nights = compare::nights_of(runs);
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
  Sides sides{{}, compare::runs_of_night(own, compare::k_night_tag, date), {}};
  if (plan.baseline) {
    sides.baseline = compare::runs_of_night(runs_of(db, *plan.baseline), compare::k_night_baseline_tag, date);
    sides.baseline_text = fmt::format("tonight's runs of {} (A/B)", plan.entry.baseline->spec.filename().string());
  } else if (auto pinned = db.list_runs({.tag = "baseline:" + plan.name(), .limit = 1}); !pinned.empty()) {
    sides.baseline = std::move(pinned);
    sides.baseline_text = "tag baseline:" + plan.name();
  } else {
    sides.baseline = compare::rolling_baseline(own, date, plan.entry.baseline_nights);
    sides.baseline_text = rolling_text(sides.baseline);
  }
  return sides;
}

// The reruns: an A/B entry's interleaved pairs, else the candidate's reruns against the same baseline.
Sides confirmation_sides(const store::Store& db, const Plan& plan, const std::string& date, const Sides& first) {
  Sides sides{first.baseline, compare::runs_of_night(runs_of(db, plan.candidate), compare::k_confirm_tag, date), {}};
  if (plan.baseline) {
    sides.baseline = compare::runs_of_night(runs_of(db, *plan.baseline), compare::k_confirm_tag, date);
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
  for (const auto& run : sides.baseline) {
    loaded.a.push_back(compare::load_run(db, run));
  }
  for (const auto& run : sides.candidate) {
    loaded.b.push_back(compare::load_run(db, run));
  }
  loaded.history = load_history(db, loaded.a, loaded.b, k_history_runs);
  return loaded;
}

compare::Comparison judge(const Loaded& loaded, const std::vector<compare::ThresholdOverride>& thresholds) {
  compare::CompareOptions options;
  options.thresholds = thresholds;
  compare::Comparison comparison = compare::compare_runs(loaded.a, loaded.b, options, loaded.history);
  compare::label_suite_thresholds(comparison);
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

// Runs (unless --no-run) and judges the reruns of a suspected timing regression.
compare::Confirmation confirm(const Plan& plan, const Night& night, const Sides& first, report::NightlyCase& item,
                              std::string& launch_error) {
  compare::Confirmation confirmation{plan.entry.confirm_rounds, nullptr, {}, rerun_label(plan)};
  if (confirmation.rounds == 0 || !compare::needs_confirmation(*item.comparison)) {
    return confirmation;
  }
  std::string error;
  if (!night.no_run) {
    night.progress(fmt::format("{}: suspected {}; confirming with {}", plan.name(), item.comparison->verdict_line(),
                               confirmation.label));
    error = run_rounds(plan, night, confirmation.rounds, compare::k_confirm_tag, compare::k_confirm_tag,
                       "confirmation round");
  }
  const store::Store db = open_store(night.globals, store::OpenMode::read_only);
  const Sides reruns = confirmation_sides(db, plan, night.date, first);
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
  store::Store db = open_store(night.globals, store::OpenMode::read_write);
  for (const auto& run : sides.candidate) {
    db.add_tag(run.id, std::string(compare::k_failed_tag) + night.date);
  }
}

std::string no_baseline_text(const Plan& plan) {
  if (plan.baseline) {
    return "no completed run of the A/B baseline tonight";
  }
  return fmt::format("no baseline yet (no run tagged baseline:{} and no earlier nightly of this spec)", plan.name());
}

/// One entry's night: what ran, what it was judged against, its grade.
struct EntryNight {
  report::NightlyCase item;
  std::string launch_error;
};

void grade_night(const Plan& plan, const Night& night, const Sides& sides, EntryNight& result) {
  const store::Store db = open_store(night.globals, store::OpenMode::read_only);
  const Loaded loaded = load_sides(db, sides);
  result.item.comparison = judge(loaded, plan.entry.thresholds);
  const auto warn_view = judge_warn(loaded, plan.entry);
  const auto confirmation = confirm(plan, night, sides, result.item, result.launch_error);
  result.item.grade = compare::grade_entry(*result.item.comparison, warn_view ? &*warn_view : nullptr, confirmation);
}

EntryNight run_entry(const Plan& plan, const Night& night) {
  EntryNight result;
  result.item.spec = plan.name();
  if (!night.no_run) {
    result.launch_error =
        run_rounds(plan, night, plan.entry.repeats, compare::k_night_tag, compare::k_night_baseline_tag, "run");
  }
  const Sides sides = first_sides(open_store(night.globals, store::OpenMode::read_only), plan, night.date);
  result.item.candidate = ids(sides.candidate);
  result.item.baseline = sides.baseline_text;
  if (sides.candidate.empty()) {
    result.item.skipped = result.launch_error.empty()
                              ? fmt::format("no completed run tagged {}{}", compare::k_night_tag, night.date)
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

/// The exit code of a night: 3 a fail, else 1 a run that failed, else 2 runs not comparable,
/// else 3 a warn with --fail-on-warn, else 0.
util::ExitCode night_exit(const std::vector<report::NightlyCase>& cases, bool launch_failed, bool fail_on_warn) {
  const auto any = [&](auto&& predicate) { return std::any_of(cases.begin(), cases.end(), predicate); };
  const bool incomparable = any([](const report::NightlyCase& item) {
    return item.comparison && item.comparison->outcome == compare::Outcome::not_comparable;
  });
  const bool failed = any([](const report::NightlyCase& item) {
    return item.comparison && item.grade.grade == Grade::fail &&
           item.comparison->outcome != compare::Outcome::not_comparable;
  });
  const bool warned =
      any([](const report::NightlyCase& item) { return item.comparison && item.grade.grade == Grade::warn; });
  return failed                     ? util::ExitCode::mismatch
         : launch_failed            ? util::ExitCode::run_failed
         : incomparable             ? util::ExitCode::usage
         : (warned && fail_on_warn) ? util::ExitCode::mismatch
                                    : util::ExitCode::ok;
}

void print_case(const report::NightlyCase& item) {
  std::cout << fmt::format("{}: {}\n", item.spec, item.comparison ? item.grade.line : "skipped: " + item.skipped);
  for (const auto& note : item.grade.notes) {
    std::cout << fmt::format("  note: {}\n", note.text);
  }
}

void print_totals(const std::vector<report::NightlyCase>& cases, util::ExitCode code) {
  size_t counts[3] = {0, 0, 0};
  size_t skipped = 0;
  for (const auto& item : cases) {
    (item.comparison ? counts[static_cast<int>(item.grade.grade)] : skipped) += 1;
  }
  std::cout << fmt::format("nightly: {} pass, {} warn, {} fail, {} skipped: exit {}\n", counts[0], counts[1], counts[2],
                           skipped, util::to_int(code));
}

struct Outputs {
  std::string junit;
  std::string summary;
};

Outputs write_reports(const NightlyOptions& options, const std::string& suite,
                      const std::vector<report::NightlyCase>& cases, const std::string& date) {
  Outputs paths{options.junit.empty() ? fmt::format("results/nightly-{}.xml", date) : options.junit,
                options.summary.empty() ? fmt::format("results/nightly-{}.md", date) : options.summary};
  for (const auto& path : {paths.junit, paths.summary}) {
    std::filesystem::create_directories(std::filesystem::absolute(path).parent_path());
  }
  write_output(paths.junit, report::render_junit(suite, cases, date + "T00:00:00Z"));
  write_output(paths.summary, report::render_nightly_markdown(suite, cases, date));
  return paths;
}

void run_nightly(const NightlyOptions& options, GlobalOptions& globals) {
  refuse_threshold_flags(options);
  const compare::Suite suite = compare::load_suite(options.suite);
  const Night night{options.date.empty() ? today_utc() : options.date, options.no_run, globals};
  check_date(night.date);
  std::vector<Plan> plans;
  for (const auto& entry : suite.specs) {
    plans.push_back(plan_entry(entry));  // every spec checked before the first run
  }
  std::vector<report::NightlyCase> cases;
  bool launch_failed = false;
  for (const auto& plan : plans) {
    EntryNight result = run_entry(plan, night);
    launch_failed = launch_failed || !result.launch_error.empty();
    cases.push_back(std::move(result.item));
  }
  const Outputs paths = write_reports(options, suite.name, cases, night.date);
  globals.result = night_exit(cases, launch_failed, options.fail_on_warn);
  std::for_each(cases.begin(), cases.end(), print_case);
  print_totals(cases, globals.result);
  std::cout << fmt::format("wrote {} and {}\n", paths.junit, paths.summary);
}

void setup_nightly(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<NightlyOptions>();
  CLI::App* command = app.add_subcommand(
      "nightly",
      "Run a suite (each entry `repeat` times, tagged nightly:<date>), compare each entry with its baseline\n"
      "(an A/B entry's baseline tonight, else the run tagged baseline:<spec name>, else the entry's runs of\n"
      "its last K nights), rerun a suspected timing regression before it fails, grade each entry pass, warn\n"
      "or fail, and write a JUnit XML file and a Markdown summary. Thresholds come from the spec's\n"
      "regression: block and the suite file only (docs/nightly.md).\n"
      "Example: expctl nightly experiments/nightly.yaml --junit results/nightly.xml");
  command->add_option("suite", options->suite, "Suite file (YAML; see docs/nightly.md)")->required();
  command->add_option("--date", options->date, "Night to tag and judge, YYYY-MM-DD (default: today, UTC)");
  command->add_option("--junit", options->junit, "JUnit XML output (default results/nightly-<date>.xml)");
  command->add_option("--summary", options->summary, "Markdown summary output (default results/nightly-<date>.md)");
  command->add_flag("--no-run", options->no_run,
                    "Launch nothing: judge the runs (and reruns) already tagged for the night");
  command->add_flag("--fail-on-warn", options->fail_on_warn, "Exit 3 when an entry is graded warn, instead of 0");
  command->add_option("--threshold", options->thresholds, "Refused: thresholds live in the suite or spec file")
      ->group("")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer() +
                  "nightly: exit 3 when an entry fails (a confirmed timing regression or a correctness\n"
                  "regression); a warn (inconclusive, not confirmed, or between warn and fail thresholds)\n"
                  "exits 0 (3 with --fail-on-warn); 1 when a run failed; 2 when runs are not comparable.\n");
  command->callback([options, globals] { run_nightly(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(nightly, 35, setup_nightly);

}  // namespace expctl::cli
