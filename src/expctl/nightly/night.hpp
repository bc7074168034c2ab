#pragma once
/// One night of a suite (`expctl nightly SUITE.yaml`, docs/nightly.md): every entry's specs are
/// checked before anything runs; each entry runs `repeat` rounds (tagged nightly:<date>, an A/B
/// entry's baseline nightly-baseline:<date>), is compared with its baseline (an A/B entry's
/// baseline tonight, else the pinned run tagged baseline:<spec name>, else the entry's runs of its
/// last K nights), has a suspected timing regression rerun before it may fail, and is graded pass,
/// warn or fail. Runs are made in-process by the run engine (in_process_launcher); the CLI only
/// parses, prints and says where the store is.

#include <functional>
#include <string>
#include <vector>

#include "expctl/compare/suite.hpp"
#include "expctl/nightly/report.hpp"
#include "expctl/run/observer.hpp"
#include "expctl/run/stop.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/exit_code.hpp"

namespace expctl::nightly {

/// Opens the store of the night in `mode`.
using OpenStore = std::function<store::Store(store::OpenMode mode)>;

/// Runs one configuration, its runs tagged with `tags` (the night's tag first); returns an error
/// text, empty on success.
using LaunchRun = std::function<std::string(const compare::SuiteConfig& config, const std::vector<std::string>& tags)>;

struct NightRequest {
  std::string date;           ///< YYYY-MM-DD (check_date)
  bool no_run = false;        ///< launch nothing: judge the runs already tagged for the night
  bool fail_on_warn = false;  ///< a warn exits 3
  OpenStore open_store;
  LaunchRun launch;                                  ///< used unless no_run
  std::function<void(const std::string&)> progress;  ///< "<spec> run 1/5"; may be empty
};

struct NightResult {
  std::vector<NightlyCase> cases;  ///< one per entry, in the suite's order
  bool launch_failed = false;      ///< a run (or rerun) did not complete
  util::ExitCode exit_code = util::ExitCode::ok;
};

/// Throws util::CompareError (exit 2) unless `date` is YYYY-MM-DD: nights compare as text.
void check_date(const std::string& date);

/// Today's date in UTC, YYYY-MM-DD.
std::string today_utc();

/// Runs and grades one night of `suite`. Every entry's specs are loaded (and their warn thresholds
/// checked) before the first run: a bad entry throws before anything ran.
NightResult run_night(const compare::Suite& suite, const NightRequest& request);

/// The exit code of a night: 3 a fail, else 1 a run that failed, else 2 runs not comparable,
/// else 3 a warn with fail_on_warn, else 0.
util::ExitCode night_exit(const std::vector<NightlyCase>& cases, bool launch_failed, bool fail_on_warn);

/// The launcher `expctl nightly` uses: the run engine in-process (run::run_spec), as `expctl run`
/// records any other run; `open_store` opens the store it records into. `observer` hears every
/// run (the CLI's quiet terminal printer; null: nobody); `stop`: the process's stop signals.
LaunchRun in_process_launcher(std::function<store::Store()> open_store,
                              std::shared_ptr<run::RunObserver> observer = nullptr, run::RankStop* stop = nullptr);

/// Where the night's reports went.
struct ReportPaths {
  std::string junit;
  std::string summary;
};

/// Writes the JUnit XML and the Markdown summary (default results/nightly-<date>.xml and .md),
/// creating their folders ("-": stdout). Throws util::CompareError (exit 1) when a file cannot be written.
ReportPaths write_reports(const std::string& suite, const std::vector<NightlyCase>& cases, const std::string& date,
                          const std::string& junit, const std::string& summary);

}  // namespace expctl::nightly
