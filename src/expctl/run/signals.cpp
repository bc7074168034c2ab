#include "expctl/run/signals.hpp"

#include <unistd.h>

#include <csignal>

#include "expctl/launch/supervisor.hpp"

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

void mark_training_started(const nlohmann::json& record) {
  if (record.value("t", "") == "step") {
    training_started().store(true);
  }
}

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = set_stop_flag;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    sigaction(signal, &action, nullptr);
  }
}

}  // namespace expctl::run
