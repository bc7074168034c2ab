#pragma once
/// The terminal printer: the CLI's run::RunObserver. Rank 0's lines and every rank's errors,
/// notes from the recorder, and a progress line redrawn in place when stderr is a terminal (rank
/// 0's periodic "step" lines are then replaced by it); at the end, the result (print_run_result).
/// Thread-safe: the recorder writes notes from its own thread.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "expctl/cli/command.hpp"
#include "expctl/run/observer.hpp"

namespace expctl::cli {

class TerminalObserver final : public run::RunObserver {
 public:
  /// `quiet` (-q): only errors, important notes and what this process trains itself print.
  /// `result_format`: how the result prints (none: the caller reports it, as nightly and ab do).
  /// `output`: where this process's own trainer lines go (a worker's stdout is its rank's output).
  explicit TerminalObserver(bool quiet, std::optional<OutputFormat> result_format = std::nullopt,
                            std::ostream& output = std::cerr);

  void started(const run::RunStarted& started) override;
  void line(std::string_view text) override;
  void output(std::string_view text) override;
  void note(std::string_view text, bool important = false) override;
  void info(std::string_view text) override;
  void error(std::string_view text) override;
  void training(std::int64_t total_steps, int world_size) override;
  void step(const train::StepMetrics& step) override;
  void finish() override;
  void result(const run::RunResult& result) override;

 private:
  void clear_progress();
  void draw_progress();

  std::mutex m_mutex;
  bool m_terminal;
  bool m_quiet;
  std::optional<OutputFormat> m_result_format;
  std::ostream& m_output;
  std::int64_t m_total = 0;
  int m_world_size = 1;
  std::optional<std::chrono::steady_clock::time_point> m_first;
  std::int64_t m_first_step = 0;
  std::chrono::steady_clock::time_point m_last_draw{};
  std::string m_progress;
};

}  // namespace expctl::cli
