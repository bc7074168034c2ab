#pragma once
/// A rank's stop handling: SIGINT/SIGTERM/SIGHUP before the first step end the process with
/// exit code 130 (nothing to checkpoint yet, and a rank in rendezvous would only wait for peers
/// that stop too); after it they request a graceful stop after the step.

#include <atomic>

namespace expctl::run {

/// Set by the handlers once training started; ranks poll it per step.
std::atomic<bool>& stop_requested();
/// Set once this rank has finished its first optimizer step.
std::atomic<bool>& training_started();
/// Sets training_started(): a rank's sink calls it with each step it receives.
void mark_training_started();
/// Installs the handlers for SIGINT/SIGTERM/SIGHUP (util::InterruptSignals with the stop flag as
/// its hook), once per process.
void install_stop_handlers();

}  // namespace expctl::run
