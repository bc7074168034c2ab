#pragma once
// A temporary store with two runs (an A/B) of two ranks each, whose points are what the recorder
// stores for a real run: the per-step metrics of train::step_fields() on every rank, eval_* on
// rank 0 every few steps. Values are chosen so that most are not exact in float32, and run B's
// rank 1 diverges (NaN loss) at its last step.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "expctl/store/store.hpp"
#include "expctl/util/sha256.hpp"
#include "support/test_support.hpp"

namespace expctl::test::tensorboard {

inline constexpr int k_ranks = 2;
inline constexpr std::int64_t k_steps = 12;
inline constexpr std::int64_t k_eval_every = 5;

/// The points one rank reports for one step, in the recorder's order (train::step_fields()).
inline std::vector<store::MetricPoint> step_points(int run, int rank, std::int64_t step) {
  const double s = static_cast<double>(step);
  const double step_time_ms = 10.0 + 0.3 * rank + 0.7 * static_cast<double>(step % 3) + 0.1 * run;
  double loss = 2.3 / (1.0 + 0.1 * s) + 0.01 * rank + 0.001 * run;
  if (run == 1 && rank == 1 && step == k_steps) {
    loss = std::nan("");
  }
  return {{rank, step, "loss", loss},
          {rank, step, "lr", 0.1 * std::pow(0.97, s)},
          {rank, step, "grad_scale", 65536.0},
          {rank, step, "skipped", 0.0},
          {rank, step, "step_time_ms", step_time_ms},
          {rank, step, "comm_wait_ms", 0.9 + 0.2 * rank + 0.01 * s},
          {rank, step, "samples_per_sec", 64.0 / (step_time_ms / 1000.0)}};
}

/// Rank 0's eval points at `step`, or none when no eval ran there.
inline std::vector<store::MetricPoint> eval_points(int run, std::int64_t step) {
  if (step % k_eval_every != 0) {
    return {};
  }
  const double s = static_cast<double>(step);
  return {{0, step, "eval_loss", 2.0 / (1.0 + 0.1 * s) + 0.002 * run}, {0, step, "eval_accuracy", 0.1 + 0.03 * s}};
}

/// Every point of run `run` in the order the recorder hands them over: step by step, each rank's
/// step record, then rank 0's eval.
inline std::vector<std::vector<store::MetricPoint>> recorder_batches(int run) {
  std::vector<std::vector<store::MetricPoint>> batches;
  for (std::int64_t step = 1; step <= k_steps; ++step) {
    for (int rank = 0; rank < k_ranks; ++rank) {
      batches.push_back(step_points(run, rank, step));
    }
    if (auto eval = eval_points(run, step); !eval.empty()) {
      batches.push_back(std::move(eval));
    }
  }
  return batches;
}

struct SyntheticStore {
  TempDir dir;
  std::filesystem::path db_path = dir / "results" / "expctl.db";
  store::Store db = store::Store::open(db_path);
  std::vector<store::RunRecord> runs;

  SyntheticStore() {
    const std::string hash = util::sha256_hex("tensorboard-test");
    db.put_spec(hash, R"({"format":"expctl-spec-v1","name":"tb"})", "tb");
    const char* starts[] = {"2026-03-01T10:00:00.250Z", "2026-03-01T11:30:00.000Z"};
    for (int run = 0; run < 2; ++run) {
      const auto started = store::parse_utc(starts[run]);
      const auto record = db.create_run({hash, std::nullopt, run == 0 ? "a" : "b", started});
      for (const auto& batch : recorder_batches(run)) {
        db.append_metrics(record.id, batch);
      }
      runs.push_back(*db.run(record.id));
    }
  }
};

/// Seconds since the Unix epoch of a run's started_at.
inline double started_seconds(const store::RunRecord& run) {
  return std::chrono::duration<double>(store::parse_utc(run.started_at)->time_since_epoch()).count();
}

}  // namespace expctl::test::tensorboard
