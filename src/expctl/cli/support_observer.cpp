#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/support_observer.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "expctl/cli/support_result.hpp"
#include "expctl/train/worker.hpp"

namespace expctl::cli {

using SteadyClock = std::chrono::steady_clock;

TerminalObserver::TerminalObserver(bool quiet, std::optional<OutputFormat> result_format, std::ostream& output)
    : m_terminal(::isatty(STDERR_FILENO) == 1), m_quiet(quiet), m_result_format(result_format), m_output(output) {}

void TerminalObserver::started(const run::RunStarted& started) {
  std::lock_guard lock(m_mutex);
  m_first.reset();
  if (m_quiet) {
    return;
  }
  std::cerr << fmt::format("run {} {}: {} rank(s) on this node, world size {}, logs in {}\n", started.run_id,
                           started.how, started.ranks, started.world_size, started.log_dir.string());
}

void TerminalObserver::line(std::string_view text) {
  std::lock_guard lock(m_mutex);
  if (m_quiet && text.find("error") == std::string_view::npos) {
    return;  // -q: only errors
  }
  if (m_terminal && text.starts_with("[rank 0] step ")) {
    return;
  }
  clear_progress();
  std::cerr << text << '\n';
  draw_progress();
}

void TerminalObserver::output(std::string_view text) {
  std::lock_guard lock(m_mutex);
  m_output << text << std::endl;
}

void TerminalObserver::note(std::string_view text, bool important) {
  std::lock_guard lock(m_mutex);
  if (m_quiet && !important) {
    return;
  }
  clear_progress();
  std::cerr << "expctl: " << text << '\n';
  draw_progress();
}

void TerminalObserver::info(std::string_view text) {
  std::lock_guard lock(m_mutex);
  if (!m_quiet) {
    std::cerr << text << '\n';
  }
}

void TerminalObserver::error(std::string_view text) {
  std::lock_guard lock(m_mutex);
  clear_progress();
  std::cerr << "expctl: error: " << text << std::endl;
  draw_progress();
}

void TerminalObserver::training(std::int64_t total_steps, int world_size) {
  std::lock_guard lock(m_mutex);
  m_world_size = world_size;
  m_total = total_steps;
}

void TerminalObserver::step(const train::StepMetrics& step) {
  std::lock_guard lock(m_mutex);
  if (!m_terminal || m_quiet) {
    return;
  }
  const auto now = SteadyClock::now();
  if (!m_first) {
    m_first = now;
    m_first_step = step.step;
  }
  if (now - m_last_draw < std::chrono::milliseconds(100) && step.step != m_total) {
    return;
  }
  m_last_draw = now;
  const double elapsed = std::chrono::duration<double>(now - *m_first).count();
  const auto done = step.step - m_first_step;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(m_total - step.step) : 0.0;
  m_progress = fmt::format("epoch {} step {}/{} loss {:.4f} samples/s {:.0f} eta {}", step.epoch, step.step, m_total,
                           step.loss, step.samples_per_sec * m_world_size, train::eta_text(eta));
  std::cerr << "\r\033[K" << m_progress << std::flush;
}

void TerminalObserver::finish() {
  std::lock_guard lock(m_mutex);
  if (!m_progress.empty()) {
    std::cerr << '\n' << std::flush;
    m_progress.clear();
  }
}

void TerminalObserver::result(const run::RunResult& result) {
  if (m_result_format) {
    (void)print_run_result(result, *m_result_format);
  }
}

void TerminalObserver::clear_progress() {
  if (!m_progress.empty()) {
    std::cerr << "\r\033[K";
  }
}

void TerminalObserver::draw_progress() {
  if (!m_progress.empty()) {
    std::cerr << m_progress;
  }
  std::cerr << std::flush;
}

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
