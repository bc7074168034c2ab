#include "expctl/run/signals.hpp"

#include <new>

#include <unistd.h>

#include "expctl/launch/supervisor.hpp"
#include "expctl/util/interrupt_signals.hpp"

namespace expctl::run {

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<bool>& training_started() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
// _exit is async-signal-safe; the atomics are lock-free.
extern "C" void set_stop_flag(int /*signal*/) {
  if (!training_started().load()) {
    ::_exit(launch::k_interrupted_exit_code);
  }
  stop_requested().store(true);
}
}  // namespace

void mark_training_started() {
  training_started().store(true);
}

void install_stop_handlers() {
  // For the rest of the process, never destroyed (a signal during exit still finds the hook): a
  // rank never supervises, so nothing else owns these signals. Built in static storage rather
  // than on the heap: with the pointer to a heap object unused, the optimiser dropped it and
  // LeakSanitizer reported every rank as leaking the object (the asan preset).
  alignas(util::InterruptSignals) static unsigned char storage[sizeof(util::InterruptSignals)];
  static const bool installed = (new (storage) util::InterruptSignals(set_stop_flag), true);
  (void)installed;
}

}  // namespace expctl::run
