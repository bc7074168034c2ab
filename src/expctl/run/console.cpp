#include "expctl/run/console.hpp"

#include <unistd.h>

#include <iostream>

#include <fmt/format.h>

#include "expctl/train/worker.hpp"

namespace expctl::run {

using SteadyClock = std::chrono::steady_clock;

Console::Console(bool quiet) : m_terminal(::isatty(STDERR_FILENO) == 1), m_quiet(quiet) {}

void Console::line(std::string_view text) {
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

void Console::note(std::string_view text, bool important) {
  std::lock_guard lock(m_mutex);
  if (m_quiet && !important) {
    return;
  }
  clear_progress();
  std::cerr << "expctl: " << text << '\n';
  draw_progress();
}

void Console::set_total(std::int64_t total) {
  std::lock_guard lock(m_mutex);
  m_total = total;
}

void Console::set_world_size(int world_size) {
  std::lock_guard lock(m_mutex);
  m_world_size = world_size;
}

void Console::step(const train::StepMetrics& step) {
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

void Console::finish() {
  std::lock_guard lock(m_mutex);
  if (!m_progress.empty()) {
    std::cerr << '\n' << std::flush;
    m_progress.clear();
  }
}

void Console::clear_progress() {
  if (!m_progress.empty()) {
    std::cerr << "\r\033[K";
  }
}

void Console::draw_progress() {
  if (!m_progress.empty()) {
    std::cerr << m_progress;
  }
  std::cerr << std::flush;
}

}  // namespace expctl::run
