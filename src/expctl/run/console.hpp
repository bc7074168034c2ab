#pragma once
/// The supervisor's console: rank 0's lines and every rank's errors, notes from the recorder,
/// and a progress line redrawn in place when stderr is a terminal (rank 0's periodic "step"
/// lines are then replaced by it). Thread-safe: the recorder writes notes from its own thread.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "expctl/train/records.hpp"

namespace expctl::run {

class Console {
 public:
  explicit Console(bool quiet);

  /// A line from a rank (already prefixed "[rank N] ") or from expctl itself.
  void line(std::string_view text);
  /// A note from expctl about the run (shown even with -q when `important`).
  void note(std::string_view text, bool important = false);
  void set_total(std::int64_t total);
  void set_world_size(int world_size);
  /// Rank 0's step: redraws the progress line (terminal only, at most 10 times a second).
  void step(const train::StepMetrics& step);
  /// Ends the progress line so that what follows starts on a fresh line.
  void finish();

 private:
  void clear_progress();
  void draw_progress();

  std::mutex m_mutex;
  bool m_terminal;
  bool m_quiet;
  std::int64_t m_total = 0;
  int m_world_size = 1;
  std::optional<std::chrono::steady_clock::time_point> m_first;
  std::int64_t m_first_step = 0;
  std::chrono::steady_clock::time_point m_last_draw{};
  std::string m_progress;
};

}  // namespace expctl::run
