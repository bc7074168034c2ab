#pragma once
/// For the targets that feed a rank's lines to the supervisor's recorder (control-channel records,
/// program metric lines): a store with one running run in the scratch folder, and an
/// observer that hears nothing. The store is recreated every k_inputs_per_store inputs so it stays small.

#include <memory>
#include <optional>
#include <string>

#include "fuzz_support.hpp"

#include "expctl/run/observer.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/store/store.hpp"

namespace expctl::fuzz {

class RecorderFixture {
 public:
  static constexpr int k_inputs_per_store = 2000;

  /// A fresh Recorder over the fixture's store, for one input.
  std::unique_ptr<run::Recorder> recorder(int live_ranks) {
    if (!m_store || ++m_inputs % k_inputs_per_store == 0) {
      open_fresh();
    }
    return std::make_unique<run::Recorder>(*m_store, m_run_id, scratch() / "runs" / m_run_id, m_observer,
                                           std::chrono::steady_clock::now(), live_ranks);
  }
  run::RunObserver& observer() { return m_observer; }

  /// One input: its first byte picks the rank (0-3), the rest is lines, each handed to
  /// `on_line(recorder, rank, line)`; then everything is written, and a store error is a finding
  /// (the run would fail).
  template <class OnLine>
  void feed(const std::uint8_t* data, std::size_t size, int live_ranks, OnLine&& on_line) {
    if (size == 0) {
      return;
    }
    const int rank = data[0] % 4;
    auto rec = recorder(live_ranks);
    for_each_line(as_text(data + 1, size - 1), [&](std::string_view line) {
      on_line(*rec, rank, line);
      return true;
    });
    rec->drain();
    rec->throw_if_fatal();
  }

 private:
  void open_fresh() {
    m_store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(scratch() / "recorder", ignored);
    std::filesystem::create_directories(scratch() / "recorder");
    m_store.emplace(store::Store::open((scratch() / "recorder" / "store.db").string()));
    m_store->put_spec(std::string(64, 'a'), "{}", "fuzz");
    m_run_id = m_store->create_run({std::string(64, 'a'), std::nullopt, "fuzz", std::nullopt}).id;
  }

  std::optional<store::Store> m_store;
  std::string m_run_id;
  run::SilentObserver m_observer;
  long m_inputs = 0;
};

}  // namespace expctl::fuzz
