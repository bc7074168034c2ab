#pragma once
/// What a run reports while it goes, to whoever started it: the run library writes nothing to the
/// terminal itself. `expctl run`, `resume`, `worker`, `nightly` and `ab` hand in the CLI's
/// terminal printer (cli/support_observer.hpp); tests, and later `serve` or a sweep in-process,
/// hand in their own (SilentObserver, CollectingObserver in run/collecting_observer.hpp). Calls
/// come from the supervisor's thread and the recorder's writer thread: an observer is thread-safe.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "expctl/train/records.hpp"

namespace expctl::run {

struct RunResult;

/// A run's ranks were started (or restarted, for a resume) on this node.
struct RunStarted {
  std::string run_id;
  /// "started", or how a resume continues ("resumed from its checkpoint at step 40 (...)").
  std::string how;
  std::size_t ranks = 0;  ///< this node's
  int world_size = 0;
  std::filesystem::path log_dir;
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;

  /// The ranks were started (supervised runs; not a rank under an external launcher).
  virtual void started(const RunStarted& started) = 0;
  /// A line a rank wrote, already prefixed "[rank N] ".
  virtual void line(std::string_view text) = 0;
  /// A line of the trainer or rank that runs in this process (under an external launcher, or
  /// `expctl worker`): its own output, always shown.
  virtual void output(std::string_view text) = 0;
  /// A note from expctl about the run; `important` ones (warnings, a rank that stopped
  /// answering, a locked store) matter even to an observer that wants little.
  virtual void note(std::string_view text, bool important = false) = 0;
  /// A line about the run that only an observer that wants everything shows, as it is (a
  /// resume's checkpoint choice: "note: run ...: ...").
  virtual void info(std::string_view text) = 0;
  /// Something went wrong besides what the result says (the end could not be recorded, a rank
  /// was given nothing to run); the printer prefixes "expctl: error: ".
  virtual void error(std::string_view text) = 0;
  /// Training started: its total steps and world size, for a progress line.
  virtual void training(std::int64_t total_steps, int world_size) = 0;
  /// Rank 0's step (the slowest rank's, once every local rank reported it).
  virtual void step(const train::StepMetrics& step) = 0;
  /// The ranks' output ended: what follows starts on a fresh line.
  virtual void finish() = 0;
  /// How the invocation ended, once it is recorded (also a refusal returned as a result).
  virtual void result(const RunResult& result) = 0;
};

/// Hears nothing: a run that reports only through its result and the store.
class SilentObserver final : public RunObserver {
 public:
  void started(const RunStarted& /*started*/) override {}
  void line(std::string_view /*text*/) override {}
  void output(std::string_view /*text*/) override {}
  void note(std::string_view /*text*/, bool /*important*/) override {}
  void info(std::string_view /*text*/) override {}
  void error(std::string_view /*text*/) override {}
  void training(std::int64_t /*total_steps*/, int /*world_size*/) override {}
  void step(const train::StepMetrics& /*step*/) override {}
  void finish() override {}
  void result(const RunResult& /*result*/) override {}
};

}  // namespace expctl::run
