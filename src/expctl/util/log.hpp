#pragma once
/// Logging facade: spdlog stays inside log.cpp. Logs go to stderr; data goes to stdout.

#include <string_view>

namespace expctl::util::log {

enum class Level { debug, info, warn, error, off };

/// Sets the threshold (default: warn; `-v` gives info, `-vv` debug, `--quiet` error).
void set_level(Level level);
Level level();

void debug(std::string_view message);
void info(std::string_view message);
/// Warnings print as "expctl: warning: <message>".
void warn(std::string_view message);

}  // namespace expctl::util::log
