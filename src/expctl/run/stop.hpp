#pragma once
/// How a rank that trains in this process learns it should stop. The program's entry owns the
/// signal handlers (cli/support_signals.hpp: installed once, kept for the rest of the process)
/// and hands them in through the request; the run library arms them only when this process
/// becomes a training rank (`expctl worker`, a rank under an external launcher), because a
/// supervising process takes the same signals with launch::Supervisor's own handlers instead.
/// Before the first step a stop signal ends the process with exit code 130 (nothing to
/// checkpoint yet, and a rank in rendezvous would only wait for peers that stop too); after it,
/// it asks for a graceful stop after the step.

#include <atomic>

namespace expctl::run {

class RankStop {
 public:
  virtual ~RankStop() = default;
  /// This process trains from now on: SIGINT/SIGTERM/SIGHUP act as described above. Idempotent.
  virtual void arm() = 0;
  /// Set once a stop was asked for after the first step; the trainer polls it per step.
  virtual std::atomic<bool>& stop_requested() = 0;
  /// This rank finished its first optimizer step (its sink calls it with each step).
  virtual void mark_training_started() = 0;
};

/// A stop nobody signals: for a process that owns no signals (tests; an in-process caller that
/// stops a run by setting the flag itself).
class StopFlag final : public RankStop {
 public:
  void arm() override {}
  std::atomic<bool>& stop_requested() override { return m_stop; }
  void mark_training_started() override {}

 private:
  std::atomic<bool> m_stop{false};
};

}  // namespace expctl::run
