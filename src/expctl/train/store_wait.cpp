#include "expctl/train/store_wait.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace expctl::train {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto k_first_pause = std::chrono::microseconds(50);
constexpr auto k_longest_pause = std::chrono::microseconds(2000);

}  // namespace

bool wait_for_keys(c10d::Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline =
      timeout == c10d::Store::kNoTimeout ? std::optional<Clock::time_point>() : Clock::now() + timeout;
  Clock::duration pause = k_first_pause;
  while (!store.check(keys)) {
    const auto now = Clock::now();
    if (deadline && now >= *deadline) {
      return false;
    }
    std::this_thread::sleep_for(deadline ? std::min(pause, *deadline - now) : pause);
    pause = std::min<Clock::duration>(pause * 2, k_longest_pause);
  }
  return true;
}

QuickPollStore::QuickPollStore(c10::intrusive_ptr<c10d::Store> inner)
    : c10d::Store(inner->getTimeout()), m_inner(std::move(inner)) {}

void QuickPollStore::set(const std::string& key, const std::vector<uint8_t>& value) { m_inner->set(key, value); }

std::vector<uint8_t> QuickPollStore::compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                                const std::vector<uint8_t>& value) {
  return m_inner->compareSet(key, current, value);
}

std::vector<uint8_t> QuickPollStore::get(const std::string& key) {
  wait({key});
  return m_inner->get(key);
}

int64_t QuickPollStore::add(const std::string& key, int64_t value) { return m_inner->add(key, value); }

bool QuickPollStore::deleteKey(const std::string& key) { return m_inner->deleteKey(key); }

bool QuickPollStore::check(const std::vector<std::string>& keys) { return m_inner->check(keys); }

int64_t QuickPollStore::getNumKeys() { return m_inner->getNumKeys(); }

void QuickPollStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void QuickPollStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  if (!wait_for_keys(*m_inner, keys, timeout)) {
    throw std::runtime_error(
        fmt::format("timed out after {} ms waiting for {} in the store", timeout.count(), fmt::join(keys, ", ")));
  }
}

void QuickPollStore::setTimeout(const std::chrono::milliseconds& timeout) {
  c10d::Store::setTimeout(timeout);
  m_inner->setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Store> QuickPollStore::clone() { return c10::make_intrusive<QuickPollStore>(m_inner); }

}  // namespace expctl::train
