#pragma once
/// Values written for people, one spelling wherever they are printed (the CLI, the text the api
/// builds for it).

#include <optional>
#include <string>

namespace expctl::util {

/// A duration: "850ms", "42.0s", "3m05s", "2h04m" (rounded); "-" when unknown, negative or not finite.
std::string duration_text(std::optional<double> seconds);

/// A stored UTC time to the second: "2026-11-29T22:31:18.042Z" -> "2026-11-29 22:31:18". Only
/// text of that shape is reformatted; anything else is returned as it is.
std::string short_utc(const std::string& utc);

}  // namespace expctl::util
