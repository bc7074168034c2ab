#include "expctl/util/log.hpp"

#include <memory>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace expctl::util::log {

namespace {

std::shared_ptr<spdlog::logger>& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto created = std::make_shared<spdlog::logger>("expctl", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    created->set_pattern("expctl: %l: %v");
    created->set_level(spdlog::level::warn);
    return created;
  }();
  return instance;
}

Level g_level = Level::warn;

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::off: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

}  // namespace

void set_level(Level level) {
  g_level = level;
  logger()->set_level(to_spdlog(level));
}

Level level() { return g_level; }

void debug(std::string_view message) { logger()->debug("{}", message); }
void info(std::string_view message) { logger()->info("{}", message); }
void warn(std::string_view message) { logger()->warn("{}", message); }

}  // namespace expctl::util::log
