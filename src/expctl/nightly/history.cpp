#include "expctl/nightly/history.hpp"

#include <algorithm>

namespace expctl::nightly {

std::string night_of(const store::RunRecord& run, std::string_view prefix) {
  for (const auto& tag : run.tags) {
    if (tag.starts_with(prefix)) {
      return tag.substr(prefix.size());
    }
  }
  return {};
}

bool from_failed_night(const store::RunRecord& run) {
  return !night_of(run, k_failed_tag).empty();
}

std::vector<std::string> nights_of(std::span<const store::RunRecord> runs) {
  std::vector<std::string> nights;
  for (const auto& run : runs) {
    if (const std::string night = night_of(run, k_night_tag); !night.empty()) {
      nights.push_back(night);
    }
  }
  std::sort(nights.begin(), nights.end(), std::greater<>());
  nights.erase(std::unique(nights.begin(), nights.end()), nights.end());
  return nights;
}

std::vector<store::RunRecord> runs_of_night(std::span<const store::RunRecord> runs, std::string_view prefix,
                                            std::string_view date) {
  std::vector<store::RunRecord> selected;
  for (const auto& run : runs) {
    if (run.status == store::RunStatus::completed && night_of(run, prefix) == date) {
      selected.push_back(run);
    }
  }
  return selected;
}

std::vector<store::RunRecord> rolling_baseline(std::span<const store::RunRecord> runs, std::string_view date,
                                               int nights) {
  std::vector<store::RunRecord> usable;
  for (const auto& run : runs) {
    const std::string night = night_of(run, k_night_tag);
    if (!night.empty() && night < date && run.status == store::RunStatus::completed && !from_failed_night(run)) {
      usable.push_back(run);
    }
  }
  const auto recent = nights_of(usable);
  const size_t kept = std::min(recent.size(), static_cast<size_t>(std::max(nights, 0)));
  std::erase_if(usable, [&](const store::RunRecord& run) {
    return std::find(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(kept), night_of(run, k_night_tag)) ==
           recent.begin() + static_cast<std::ptrdiff_t>(kept);
  });
  return usable;
}

}  // namespace expctl::nightly
