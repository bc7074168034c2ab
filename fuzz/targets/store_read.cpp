// fuzz_store_read: a hostile file given as --db to the read commands (list, show, compare):
// store::Store::open read-only, then every read a command makes of every run.
#include "expctl/store/store.hpp"
#include "fuzz_support.hpp"
#include "store_seed.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace expctl;
  const auto file = fuzz::scratch() / "store.db";
  std::error_code ignored;
  std::filesystem::remove(fuzz::scratch() / "store.db-wal", ignored);
  std::filesystem::remove(fuzz::scratch() / "store.db-shm", ignored);
  fuzz::write_file(file, fuzz::as_text(data, size));
  fuzz::expect_only_user_errors([&] {
    const auto db = store::Store::open(file.string(), store::OpenMode::read_only);
    for (const auto& run : db.list_runs()) {
      (void)db.find_run(run.id);
      (void)db.spec(run.spec_hash);
      if (run.environment_hash) {
        (void)db.environment(*run.environment_hash);
      }
      (void)db.metrics(run.id);
      for (const auto& series : db.metric_series(run.id)) {
        (void)db.series_columns(run.id, series.name);
        (void)db.series_aggregates(run.id, series.name);
        (void)db.recent_metrics(run.id, series.name, 0, 5);
      }
      (void)db.artifacts(run.id);
      (void)db.ranks(run.id);
    }
  });
  return 0;
}
