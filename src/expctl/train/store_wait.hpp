#pragma once
/// A rendezvous file without c10d's polling. FileStore (the rendezvous of one host) re-reads its
/// file every 10 ms while it waits for a key, and a single-host rendezvous has several rounds in
/// which one rank waits for another's key (the join, Gloo's full mesh, the host layout, the
/// shared-memory segment): at 10 ms each, that was a third of the time between LibTorch being
/// loaded and the first step. QuickPollStore waits by polling check() instead, from 50 µs apart
/// up to 2 ms apart: a key set a moment later is seen a moment later, and a long wait (a rank
/// still starting) costs about a check every 2 ms, a few microseconds each.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace expctl::train {

/// True once every key is set; false when `timeout` passed first (zero: no limit, as in c10d).
bool wait_for_keys(c10d::Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

/// Every call goes to `inner` (a c10d::FileStore), but get() and wait() wait through
/// wait_for_keys. Timeouts throw std::runtime_error naming the keys, as c10d's stores do.
class QuickPollStore final : public c10d::Store {
 public:
  explicit QuickPollStore(c10::intrusive_ptr<c10d::Store> inner);

  using c10d::Store::set;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  using c10d::Store::compareSet;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                  const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
  /// PyTorch 2.x declares clone() pure virtual, 1.13 not at all: hence no `override`. The copy
  /// shares the inner store, whose operations lock the file.
  virtual c10::intrusive_ptr<c10d::Store> clone();  // NOLINT(modernize-use-override)

 private:
  c10::intrusive_ptr<c10d::Store> m_inner;
};

}  // namespace expctl::train
