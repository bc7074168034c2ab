#include "expctl/store/types.hpp"

#include <cstdio>
#include <ctime>
#include <iterator>

#include <fmt/format.h>

#include "expctl/util/strings.hpp"

namespace expctl::store {

static_assert(std::size(k_run_status_names) == static_cast<size_t>(RunStatus::queued) + 1,
              "one name per RunStatus value");

std::string_view to_string(RunStatus status) {
  return k_run_status_names[static_cast<size_t>(status)];
}

std::optional<RunStatus> parse_run_status(std::string_view text) {
  for (size_t i = 0; i < std::size(k_run_status_names); ++i) {
    if (k_run_status_names[i] == text) {
      return static_cast<RunStatus>(i);
    }
  }
  return std::nullopt;
}

namespace {

/// The run id's shape, character by character: 'd' a decimal digit, 'x' a lowercase hex digit.
constexpr std::string_view k_run_id_shape = "dddddddd-dddddd-xxxxxx";

bool fits_shape(std::string_view text) {
  if (text.size() > k_run_id_shape.size()) {
    return false;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char shape = k_run_id_shape[i];
    const bool digit = c >= '0' && c <= '9';
    const bool fits = shape == '-' ? c == '-' : shape == 'd' ? digit : digit || (c >= 'a' && c <= 'f');
    if (!fits) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool is_run_id(std::string_view text) {
  return text.size() == k_run_id_shape.size() && fits_shape(text);
}

bool is_run_id_prefix(std::string_view text) {
  return !text.empty() && fits_shape(text);
}

std::string invalid_run_id_text(std::string_view id, std::string_view where) {
  constexpr std::size_t k_shown = 40;
  return fmt::format(
      "{}: {}{} is not a run id (YYYYMMDD-HHMMSS-xxxxxx, as expctl makes them): it was not written "
      "by expctl and is never used as a folder name",
      where, util::quoted(id.substr(0, k_shown)), id.size() > k_shown ? "..." : "");
}

std::string format_utc(Clock::time_point time) {
  const auto since_epoch = std::chrono::floor<std::chrono::milliseconds>(time.time_since_epoch());
  const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const std::time_t whole = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  ::gmtime_r(&whole, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                     utc.tm_hour, utc.tm_min, utc.tm_sec, (since_epoch - seconds).count());
}

std::optional<Clock::time_point> parse_utc(std::string_view text) {
  std::tm utc{};
  int millis = 0;
  int consumed = 0;
  const std::string copy(text);
  if (std::sscanf(copy.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &utc.tm_year, &utc.tm_mon, &utc.tm_mday, &utc.tm_hour,
                  &utc.tm_min, &utc.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  std::string_view rest = text.substr(19);
  if (rest.size() == 5 && rest[0] == '.') {
    int fraction_consumed = 0;
    if (std::sscanf(copy.c_str() + 20, "%3d%n", &millis, &fraction_consumed) != 1 || fraction_consumed != 3) {
      return std::nullopt;
    }
    rest.remove_prefix(4);
  }
  if (rest != "Z") {
    return std::nullopt;
  }
  // Fields out of range (month 13, second 99) would be normalised by timegm into another time, and a
  // year past 2262 overflows the clock's nanoseconds: both are a damaged record, not a time.
  if (utc.tm_year < 1970 || utc.tm_year > 2200 || utc.tm_mon < 1 || utc.tm_mon > 12 || utc.tm_mday < 1 ||
      utc.tm_mday > 31 || utc.tm_hour > 23 || utc.tm_min > 59 || utc.tm_sec > 60 || utc.tm_hour < 0 ||
      utc.tm_min < 0 || utc.tm_sec < 0 || millis < 0) {
    return std::nullopt;
  }
  utc.tm_year -= 1900;
  utc.tm_mon -= 1;
  const std::time_t whole = ::timegm(&utc);
  return Clock::time_point(std::chrono::seconds(whole)) + std::chrono::milliseconds(millis);
}

std::optional<double> RunRecord::duration_seconds(Clock::time_point now) const {
  const auto start = parse_utc(started_at);
  std::optional<Clock::time_point> end = now;
  if (ended_at) {
    end = parse_utc(*ended_at);
  } else if (status == RunStatus::lost && heartbeat_at) {
    end = parse_utc(*heartbeat_at);  // it ended unseen: the last heartbeat is the last sign of it
  }
  if (!start || !end) {
    return std::nullopt;
  }
  return std::chrono::duration<double>(*end - *start).count();
}

}  // namespace expctl::store
