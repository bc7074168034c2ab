#pragma once
/// An observer that keeps what a run reported, for tests (and for a caller that shows it later,
/// such as `serve` or a sweep that runs points in-process). Thread-safe; read it once the run
/// returned.

#include <mutex>
#include <string>
#include <vector>

#include "expctl/run/engine.hpp"
#include "expctl/run/observer.hpp"

namespace expctl::run {

class CollectingObserver final : public RunObserver {
 public:
  void started(const RunStarted& started) override { add(m_started, started); }
  void line(std::string_view text) override { add(m_lines, std::string(text)); }
  void output(std::string_view text) override { add(m_output, std::string(text)); }
  void note(std::string_view text, bool /*important*/) override { add(m_notes, std::string(text)); }
  void info(std::string_view text) override { add(m_notes, std::string(text)); }
  void error(std::string_view text) override { add(m_errors, std::string(text)); }
  void training(std::int64_t total_steps, int /*world_size*/) override { add(m_totals, total_steps); }
  void step(const train::StepMetrics& step) override { add(m_steps, step.step); }
  void finish() override {}
  void result(const RunResult& result) override { add(m_results, result); }

  std::vector<RunStarted> started() const { return copy(m_started); }
  std::vector<std::string> lines() const { return copy(m_lines); }
  std::vector<std::string> output() const { return copy(m_output); }
  /// Notes and info lines, in order.
  std::vector<std::string> notes() const { return copy(m_notes); }
  std::vector<std::string> errors() const { return copy(m_errors); }
  std::vector<std::int64_t> totals() const { return copy(m_totals); }
  /// The steps of the progress calls, in order.
  std::vector<std::int64_t> steps() const { return copy(m_steps); }
  std::vector<RunResult> results() const { return copy(m_results); }

 private:
  template <typename T>
  void add(std::vector<T>& to, T value) {
    std::lock_guard lock(m_mutex);
    to.push_back(std::move(value));
  }
  template <typename T>
  std::vector<T> copy(const std::vector<T>& from) const {
    std::lock_guard lock(m_mutex);
    return from;
  }

  mutable std::mutex m_mutex;
  std::vector<RunStarted> m_started;
  std::vector<std::string> m_lines;
  std::vector<std::string> m_output;
  std::vector<std::string> m_notes;
  std::vector<std::string> m_errors;
  std::vector<std::int64_t> m_totals;
  std::vector<std::int64_t> m_steps;
  std::vector<RunResult> m_results;
};

}  // namespace expctl::run
