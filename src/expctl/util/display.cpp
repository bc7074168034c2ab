#include "expctl/util/display.hpp"

#include <cmath>

#include <fmt/format.h>

namespace expctl::util {

std::string duration_text(std::optional<double> seconds) {
  if (!seconds || !std::isfinite(*seconds) || *seconds < 0) {
    return "-";
  }
  if (*seconds < 1.0) {
    return fmt::format("{}ms", static_cast<long>(std::lround(*seconds * 1000)));
  }
  if (*seconds < 60.0) {
    return fmt::format("{:.1f}s", *seconds);
  }
  const long whole = std::lround(*seconds);
  if (whole < 3600) {
    return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  }
  return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
}

std::string short_utc(const std::string& utc) {
  if (utc.size() < 19 || utc[10] != 'T') {
    return utc;
  }
  return utc.substr(0, 10) + " " + utc.substr(11, 8);
}

}  // namespace expctl::util
