#include "expctl/store/failure.hpp"

#include <algorithm>
#include <random>
#include <thread>

namespace expctl::store {

std::string_view to_string(FailureKind kind) {
  switch (kind) {
    case FailureKind::busy:
      return "busy";
    case FailureKind::full:
      return "full";
    case FailureKind::read_only:
      return "read-only";
    case FailureKind::unreachable:
      return "unreachable";
    case FailureKind::corrupt:
      return "corrupt";
    case FailureKind::io:
      return "io";
    case FailureKind::input:
      return "input";
  }
  return "unknown";
}

std::optional<FailureKind> failure_kind(const std::exception& error) {
  if (const auto* typed = dynamic_cast<const Error*>(&error)) {
    return typed->kind();
  }
  return std::nullopt;
}

namespace detail {

namespace {

constexpr std::chrono::milliseconds k_first_backoff{5};
constexpr std::chrono::milliseconds k_max_backoff{250};

}  // namespace

bool back_off(int attempt, std::chrono::steady_clock::time_point start, std::chrono::seconds budget) {
  if (std::chrono::steady_clock::now() - start > budget) {
    return false;
  }
  static thread_local std::mt19937 rng{std::random_device{}()};
  const auto base = std::min(k_max_backoff, k_first_backoff * (1 << std::min(attempt, 6)));
  std::uniform_int_distribution<long> jitter(base.count() / 2, base.count());
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
  return true;
}

}  // namespace detail

}  // namespace expctl::store
