#ifdef EXPCTL_WITH_TORCH_PROVIDER

#include "expctl/cli/support_signals.hpp"

#include <new>

#include <unistd.h>

#include "expctl/launch/supervisor.hpp"
#include "expctl/util/interrupt_signals.hpp"

namespace expctl::cli {
namespace {

// The handler's state: a signal handler reaches nothing but what is global. Lock-free atomics.
std::atomic<bool> g_stop_requested{false};
std::atomic<bool> g_training_started{false};

// _exit is async-signal-safe.
extern "C" void set_stop_flag(int /*signal*/) {
  if (!g_training_started.load()) {
    ::_exit(launch::k_interrupted_exit_code);
  }
  g_stop_requested.store(true);
}

class ProcessStop final : public run::RankStop {
 public:
  void arm() override {
    // Built in static storage rather than on the heap: with the pointer to a heap object unused,
    // the optimiser dropped it and LeakSanitizer reported every rank as leaking the object (the
    // asan preset).
    alignas(util::InterruptSignals) static unsigned char storage[sizeof(util::InterruptSignals)];
    static const bool installed = (new (storage) util::InterruptSignals(set_stop_flag), true);
    (void)installed;
  }
  std::atomic<bool>& stop_requested() override { return g_stop_requested; }
  void mark_training_started() override { g_training_started.store(true); }
};

}  // namespace

run::RankStop& process_stop() {
  static ProcessStop stop;
  return stop;
}

}  // namespace expctl::cli

#endif  // EXPCTL_WITH_TORCH_PROVIDER
