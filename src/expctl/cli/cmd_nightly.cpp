// `expctl nightly SUITE.yaml`: runs every spec of a suite (tagged nightly:<date>), compares each
// with its baseline (tag baseline:<spec name>, else the previous nightly of the same spec) and
// writes a JUnit XML file and a Markdown summary for CI.
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

constexpr std::string_view k_nightly_tag = "nightly:";
// A nightly run of a CI-sized spec takes seconds; this only stops a hung run from eating the job.

struct NightlyOptions {
  std::string suite;
  std::string date;  ///< YYYY-MM-DD; default: today (UTC)
  std::string junit;
  std::string summary;
  bool no_run = false;
  std::vector<std::string> thresholds;
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

// Runs one entry in-process through the run engine, exactly as `expctl run` records any other
// run. Returns an error text, empty on success.
std::string launch_run(const GlobalOptions& globals, const compare::SuiteEntry& entry, const std::string& tag) {
#ifdef EXPCTL_WITH_TORCH_PROVIDER
  run::RunRequest request;
  request.spec_file = entry.spec;
  request.overrides = entry.overrides;
  request.tags = {tag};
  request.open_store = store_opener(globals);
  request.quiet = true;
  try {
    const auto result = run::run_spec(request);
    if (!result.refusal.empty()) {
      return fmt::format("expctl run {}: {}", entry.spec.string(), result.refusal);
    }
    if (result.exit_code != util::ExitCode::ok) {
      const std::string cause = result.run ? result.run->root_cause : std::string();
      return fmt::format("expctl run {} exited {}: {}", entry.spec.string(), util::to_int(result.exit_code),
                         cause.substr(0, cause.find('\n')));
    }
    return {};
  } catch (const util::Failure& error) {
    return fmt::format("expctl run {} exited {}: {}", entry.spec.string(), util::to_int(error.exit_code()),
                       error.what());
  }
#else
  (void)globals;
  (void)tag;
  return fmt::format("expctl run {}: this expctl was built without LibTorch (EXPCTL_WITH_TORCH=OFF)",
                     entry.spec.string());
#endif
}

std::string nightly_date(const store::RunRecord& run) {
  for (const auto& tag : run.tags) {
    if (tag.starts_with(k_nightly_tag)) {
      return tag.substr(k_nightly_tag.size());
    }
  }
  return {};
}

struct Sides {
  std::vector<store::RunRecord> candidate;
  std::vector<store::RunRecord> baseline;
  std::string baseline_text;
};

// Tonight's completed runs of the spec, and its baseline: the run tagged baseline:<name>, or
// every run of the latest earlier night.
Sides find_sides(const store::Store& db, const spec::Spec& spec, const std::string& date) {
  Sides sides;
  std::string previous_night;
  const auto runs = db.list_runs({.spec_hash_prefix = spec.hash()});
  for (const auto& run : runs) {
    const std::string night = nightly_date(run);
    if (night == date && run.status == store::RunStatus::completed) {
      sides.candidate.push_back(run);
    } else if (!night.empty() && night < date && night > previous_night) {
      previous_night = night;
    }
  }
  const std::string name = spec.get_string("name");
  if (auto tagged = db.list_runs({.tag = "baseline:" + name, .limit = 1}); !tagged.empty()) {
    sides.baseline = std::move(tagged);
    sides.baseline_text = "tag baseline:" + name;
    return sides;
  }
  for (const auto& run : runs) {
    if (!previous_night.empty() && nightly_date(run) == previous_night && run.status == store::RunStatus::completed) {
      sides.baseline.push_back(run);
    }
  }
  sides.baseline_text = previous_night.empty() ? "" : "nightly " + previous_night;
  return sides;
}

std::string ids(const std::vector<store::RunRecord>& runs) {
  std::string text;
  for (const auto& run : runs) {
    text += (text.empty() ? "" : ",") + run.id;
  }
  return text;
}

std::vector<compare::RunData> load(const store::Store& db, const std::vector<store::RunRecord>& runs) {
  std::vector<compare::RunData> data;
  for (const auto& run : runs) {
    data.push_back(compare::load_run(db, run));
  }
  return data;
}

report::NightlyCase judge_spec(const store::Store& db, const spec::Spec& spec, const std::string& date,
                               const std::string& launch_error, const compare::CompareOptions& options) {
  report::NightlyCase item;
  item.spec = spec.get_string("name");
  const Sides sides = find_sides(db, spec, date);
  item.candidate = ids(sides.candidate);
  item.baseline = sides.baseline_text;
  if (sides.candidate.empty()) {
    item.skipped = launch_error.empty() ? fmt::format("no completed run tagged nightly:{}", date) : launch_error;
  } else if (sides.baseline.empty()) {
    item.skipped = fmt::format("no baseline yet (no run tagged baseline:{} and no earlier nightly)", item.spec);
  } else {
    // The same run-level statistics as `expctl compare`: earlier runs of the same spec on the same
    // environment inform the run-to-run noise.
    const auto baseline = load(db, sides.baseline);
    const auto candidate = load(db, sides.candidate);
    item.comparison =
        compare::compare_runs(baseline, candidate, options, load_history(db, baseline, candidate, 20));
  }
  return item;
}

void run_nightly(const NightlyOptions& options, GlobalOptions& globals) {
  const compare::Suite suite = compare::load_suite(options.suite);
  const compare::CompareOptions compare_options = make_compare_options({}, options.thresholds);
  const std::string date = options.date.empty() ? today_utc() : options.date;
  check_date(date);
  std::vector<report::NightlyCase> cases;
  bool launch_failed = false;
  for (const auto& entry : suite.specs) {
    const spec::Spec spec = spec::load_spec(entry.spec, spec::LoadOptions{entry.overrides});
    std::string launch_error;
    for (int repeat = 0; repeat < entry.repeats && !options.no_run && launch_error.empty(); ++repeat) {
      if (!globals.quiet) {
        std::cerr << fmt::format("nightly: {} run {}/{}\n", spec.get_string("name"), repeat + 1, entry.repeats);
      }
      launch_error = launch_run(globals, entry, std::string(k_nightly_tag) + date);
    }
    launch_failed = launch_failed || !launch_error.empty();
    const store::Store db = open_store(globals, store::OpenMode::read_only);
    cases.push_back(judge_spec(db, spec, date, launch_error, compare_options));
  }
  const std::string junit_path = options.junit.empty() ? fmt::format("results/nightly-{}.xml", date) : options.junit;
  const std::string summary_path =
      options.summary.empty() ? fmt::format("results/nightly-{}.md", date) : options.summary;
  std::filesystem::create_directories(std::filesystem::absolute(junit_path).parent_path());
  std::filesystem::create_directories(std::filesystem::absolute(summary_path).parent_path());
  const std::string timestamp = date + "T00:00:00Z";
  write_output(junit_path, report::render_junit(suite.name, cases, timestamp));
  write_output(summary_path, report::render_nightly_markdown(suite.name, cases, date));
  bool regression = false;
  bool incomparable = false;
  for (const auto& item : cases) {
    std::cout << fmt::format("{}: {}\n", item.spec,
                             item.comparison ? item.comparison->verdict_line() : "skipped: " + item.skipped);
    regression = regression || (item.comparison && item.comparison->outcome == compare::Outcome::regression);
    incomparable = incomparable || (item.comparison && item.comparison->outcome == compare::Outcome::not_comparable);
  }
  std::cout << fmt::format("wrote {} and {}\n", junit_path, summary_path);
  globals.result = regression      ? util::ExitCode::mismatch
                   : launch_failed ? util::ExitCode::run_failed
                   : incomparable  ? util::ExitCode::usage
                                   : util::ExitCode::ok;
}

void setup_nightly(CLI::App& app, const std::shared_ptr<GlobalOptions>& globals) {
  auto options = std::make_shared<NightlyOptions>();
  CLI::App* command = app.add_subcommand(
      "nightly",
      "Run a suite of specs (each run tagged nightly:<date>), compare each spec's runs with its baseline\n"
      "(tag baseline:<spec name>, else the previous nightly) and write a JUnit XML file and a Markdown summary.\n"
      "Exit 3 on any regression, 1 when a run failed, 2 for bad input or runs that are not comparable.\n"
      "Example: expctl nightly experiments/nightly.yaml --junit results/nightly.xml");
  command->add_option("suite", options->suite, "Suite file (YAML: suite, specs: [{spec, repeats, set}])")->required();
  command->add_option("--date", options->date, "Night to tag and judge, YYYY-MM-DD (default: today, UTC)");
  command->add_option("--junit", options->junit, "JUnit XML output (default results/nightly-<date>.xml)");
  command->add_option("--summary", options->summary, "Markdown summary output (default results/nightly-<date>.md)");
  command->add_flag("--no-run", options->no_run, "Launch nothing: judge the runs already tagged nightly:<date>");
  command->add_option("--threshold", options->thresholds, "Override a threshold: NAME=5% | NAME=-0.5pp | NAME=0.002")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->footer(exit_codes_footer());
  command->callback([options, globals] { run_nightly(*options, *globals); });
}

}  // namespace

EXPCTL_REGISTER_COMMAND(nightly, 35, setup_nightly);

}  // namespace expctl::cli
