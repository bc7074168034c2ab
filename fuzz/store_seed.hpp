#pragma once
/// The seed of the store targets, whose LLVMFuzzerInitialize this header defines:
/// `EXPCTL_FUZZ_MAKE_STORE_SEED=FILE fuzz_store_read` (or the replay program) writes a small
/// expctl store to FILE and exits, instead of fuzzing. It holds two runs with a spec, an environment, ranks, metric points (NaN included), artifacts and tags,
/// so that mutations start from every table. fuzz/corpus/store_*/seed.db was made this way.

#include <cmath>
#include <cstdlib>
#include <limits>

#include "expctl/store/store.hpp"

namespace expctl::fuzz {

inline void make_store_seed_if_asked() {
  const char* file = std::getenv("EXPCTL_FUZZ_MAKE_STORE_SEED");
  if (file == nullptr || *file == 0) {
    return;
  }
  {
    auto db = store::Store::open(file);
    const std::string hash(64, 'a');
    db.put_spec(hash, R"({"spec":{"name":"seed","seed":7},"version":1})", "seed");
    db.put_environment(std::string(64, 'e'), R"({"software":{"expctl":"0.1.0"}})");
    for (int i = 0; i < 2; ++i) {
      const auto run = db.create_run({hash, std::string(64, 'e'), "seed", std::nullopt});
      db.add_rank(run.id, {0, "host", 123, std::nullopt, store::RunStatus::running, std::nullopt, std::nullopt});
      db.add_rank(run.id, {1, "host", 124, std::nullopt, store::RunStatus::running, std::nullopt, std::nullopt});
      const std::vector<store::MetricPoint> points = {{0, 1, "loss", 0.5},
                                                      {0, 2, "loss", std::numeric_limits<double>::quiet_NaN()},
                                                      {1, 1, "loss", 0.25},
                                                      {0, 1, "step_time_ms", 3.0},
                                                      {0, 2, "step_time_ms", std::numeric_limits<double>::infinity()}};
      db.append_metrics(run.id, points);
      db.add_artifact(run.id, {"checkpoints/rank0-step2.pt", std::string(64, 'c'), 42});
      db.add_tag(run.id, "baseline:seed");
      db.set_summary(run.id, R"({"final_loss":0.5,"steps":2})");
      db.update_rank(run.id, 0, store::RunStatus::completed, 0, std::nullopt);
      db.update_rank(run.id, 1, store::RunStatus::failed, std::nullopt, 9);
      db.finish_run(run.id, i == 0 ? store::RunStatus::completed : store::RunStatus::failed, i, i == 0 ? "" : "rank 1 killed");
    }
  }
  std::exit(0);
}

}  // namespace expctl::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  expctl::fuzz::make_store_seed_if_asked();
  return 0;
}
