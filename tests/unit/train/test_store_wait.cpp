// QuickPollStore (train/store_wait.hpp): the rendezvous file's waits, without FileStore's
// 10 ms polling. What it must keep: a get() that waits for a key another process sets later
// and returns its value, wait() with and without its own timeout, a timeout that names the
// keys, and every other call passed through to the file.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "expctl/train/store_wait.hpp"
#include "support/test_support.hpp"

namespace {

using namespace std::chrono_literals;
using expctl::train::QuickPollStore;

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

c10::intrusive_ptr<QuickPollStore> quick_store(const std::filesystem::path& file, int world) {
  auto store = c10::make_intrusive<QuickPollStore>(c10::make_intrusive<c10d::FileStore>(file.string(), world));
  store->setTimeout(5s);
  return store;
}

}  // namespace

TEST_CASE("store wait: get() waits for a key a second store sets later, and returns its value") {
  expctl::test::TempDir dir;
  const auto file = dir.path() / "rendezvous";
  auto waiting = quick_store(file, 2);
  std::thread setter([&file] {
    std::this_thread::sleep_for(100ms);
    auto other = c10::make_intrusive<c10d::FileStore>(file.string(), 2);
    other->set("late", bytes("value"));
  });
  const auto start = std::chrono::steady_clock::now();
  const auto value = waiting->get("late");
  const auto waited = std::chrono::steady_clock::now() - start;
  setter.join();
  CHECK(value == bytes("value"));
  CHECK(waited >= 90ms);  // it did wait for the key (how soon after is the benchmark's business)
}

TEST_CASE("store wait: wait() returns once every key is set, and a timeout names the missing keys") {
  expctl::test::TempDir dir;
  auto store = quick_store(dir.path() / "rendezvous", 1);
  store->set("a", bytes("1"));
  store->set("b", bytes("2"));
  CHECK_NOTHROW(store->wait({"a", "b"}));
  CHECK_NOTHROW(store->wait({"a"}, 10ms));
  try {
    store->wait({"a", "missing"}, 30ms);
    FAIL("wait() returned although a key was never set");
  } catch (const std::runtime_error& error) {
    CHECK_THAT(error.what(), Catch::Contains("timed out after 30 ms") && Catch::Contains("missing"));
  }
  store->setTimeout(40ms);
  CHECK_THROWS_WITH(store->get("never"), Catch::Contains("timed out after 40 ms") && Catch::Contains("never"));
}

TEST_CASE("store wait: the other calls reach the file") {
  expctl::test::TempDir dir;
  const auto file = dir.path() / "rendezvous";
  auto store = quick_store(file, 1);
  auto plain = c10::make_intrusive<c10d::FileStore>(file.string(), 1);
  store->set("k", bytes("v"));
  CHECK(plain->get("k") == bytes("v"));
  CHECK(store->add("counter", 2) == 2);
  CHECK(plain->add("counter", 3) == 5);
  CHECK(store->check({"k", "counter"}));
  CHECK_FALSE(store->check({"absent"}));
  CHECK(store->getNumKeys() == plain->getNumKeys());
  CHECK(store->deleteKey("k"));
  CHECK_FALSE(plain->check({"k"}));
  CHECK(store->compareSet("cas", bytes(""), bytes("new")) == bytes("new"));
  CHECK(plain->get("cas") == bytes("new"));
}
