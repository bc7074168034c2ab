#pragma once
/// `expctl ab A.yaml B.yaml --repeat N`'s experiment: the two specs run interleaved, A B A B ...,
/// through the run engine in-process (run::run_spec), so that slow drifts of the machine
/// (temperature, other load) fall on both sides alike, every run tagged ab:<name> and
/// ab:<name>:a or ab:<name>:b. Comparing the two groups is the CLI's (as `expctl compare`'s).

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "expctl/run/engine.hpp"

namespace expctl::nightly {

struct AbRequest {
  std::filesystem::path spec_a{};  ///< side A, the baseline
  std::filesystem::path spec_b{};  ///< side B, the candidate
  int repeat = 3;                  ///< runs per side
  bool vary_seed = false;          ///< repeat i of both sides runs with seed i (1..repeat)
  std::vector<std::string> set_both{};
  std::vector<std::string> set_a{};
  std::vector<std::string> set_b{};
  std::vector<std::string> tags{};  ///< on every run, before the ab: tags
  std::string name{};               ///< the experiment's name in its tags (ab_experiment_name)
  run::OpenStore open_store{};
  /// Hears every run (the CLI's quiet terminal printer; null: nobody); outlives run_ab.
  run::RunObserver* observer = nullptr;
  run::RankStop* stop = nullptr;  ///< the process's stop signals (run::RunRequest::stop)
  /// Before each run: its side ('A' or 'B'), its repeat (1-based) and its request. May be empty.
  std::function<void(char side, int index, const run::RunRequest& request)> starting{};
  /// After each run, before it is judged (a refusal then stops the experiment). May be empty.
  std::function<void(char side, const run::RunResult& result)> finished{};
};

/// The ids of each side's completed runs, in order.
struct AbRuns {
  std::vector<std::string> a;
  std::vector<std::string> b;
  bool interrupted = false;  ///< stopped by Ctrl-C (what completed is kept)
};

/// "ab-20261201-101530" (UTC, now): names an experiment's tags.
std::string ab_experiment_name();

/// Runs the experiment. Both sides' specs are loaded before the first run (a typo on side B must
/// not cost side A's runs). Throws util::UsageError when a run is refused (the machine differs
/// from a side's pins), util::TrainError when a run does not complete; an interrupted run ends
/// the experiment with what completed.
AbRuns run_ab(const AbRequest& request);

}  // namespace expctl::nightly
