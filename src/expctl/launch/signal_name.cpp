#include <cstring>

#include <fmt/format.h>

#include "expctl/launch/supervisor.hpp"

namespace expctl::launch {

std::string signal_name(int signal) {
  // sigabbrev_np (glibc >= 2.32) knows every signal of this platform, real-time ones excepted.
  const char* abbreviation = ::sigabbrev_np(signal);
  if (abbreviation == nullptr) {
    return fmt::format("signal {}", signal);
  }
  return fmt::format("SIG{}", abbreviation);
}

std::string describe(const RankExit& exit) {
  if (exit.signal != 0) {
    return fmt::format("was killed by {}", signal_name(exit.signal));
  }
  if (exit.exit_code == 0) {
    return "exited normally";
  }
  return fmt::format("exited with code {}", exit.exit_code);
}

std::string_view to_string(RunStatus status) {
  switch (status) {
    case RunStatus::completed:
      return "completed";
    case RunStatus::failed:
      return "failed";
    case RunStatus::interrupted:
      return "interrupted";
  }
  return "unknown";
}

}  // namespace expctl::launch
