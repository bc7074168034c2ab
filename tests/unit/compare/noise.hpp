#pragma once
/// Seeded, portable noise for the compare tests: std::normal_distribution differs between
/// standard libraries, so samples come from mt19937_64 (fixed by the standard) and Box–Muller.

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

namespace expctl::compare::testing {

class Noise {
 public:
  explicit Noise(uint64_t seed) : m_engine(seed) {}

  /// Uniform in (0, 1): 53 random bits, shifted off zero so log() is finite.
  double uniform() { return (static_cast<double>(m_engine() >> 11) + 0.5) * 0x1.0p-53; }

  /// Standard normal by Box–Muller (one of the pair; simplicity over speed).
  double normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform()); }

  /// `count` samples around `centre` with a standard deviation of `relative_sd` · centre.
  std::vector<double> samples(size_t count, double centre, double relative_sd) {
    std::vector<double> values(count);
    for (double& value : values) value = centre * (1 + relative_sd * normal());
    return values;
  }

 private:
  std::mt19937_64 m_engine;
};

}  // namespace expctl::compare::testing
