// Writes a store for bench/compare_scale.sh: two long runs A and B of one spec on one environment
// (every per-step series the runner records, for every rank, and the runner's summary), plus
// earlier runs of the same spec and environment that carry only a summary (the history compare
// reads its run-to-run noise from). Prints the ids of A and B, one per line.
//
//   expctl_make_compare_store --db PATH [--steps 100000] [--ranks 2] [--history 6] [--slowdown 0]
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <numbers>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/compare/statistics.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/run/summary.hpp"
#include "expctl/store/store.hpp"
#include "expctl/util/sha256.hpp"

namespace {

using namespace expctl;
using nlohmann::json;

struct Options {
  std::string db;
  std::int64_t steps = 100'000;
  int ranks = 2;
  int history = 6;
  double slowdown = 0.0;  ///< B's step time is (1 + slowdown) times A's
};

// Seeded normal numbers (Box-Muller over mt19937_64): the same store on every machine.
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : m_engine(seed) {}
  double operator()() {
    const double u = (static_cast<double>(m_engine() >> 11) + 0.5) * 0x1.0p-53;
    const double v = (static_cast<double>(m_engine() >> 11) + 0.5) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }

 private:
  std::mt19937_64 m_engine;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--db")
      options.db = value;
    else if (key == "--steps")
      options.steps = std::stoll(value);
    else if (key == "--ranks")
      options.ranks = std::stoi(value);
    else if (key == "--history")
      options.history = std::stoi(value);
    else if (key == "--slowdown")
      options.slowdown = std::stod(value);
    else
      throw std::runtime_error("unknown option " + std::string(key) + " (see the comment at the top of the file)");
  }
  if (options.db.empty()) {
    throw std::runtime_error("--db PATH is required");
  }
  return options;
}

std::string put_spec(store::Store& db) {
  const json spec = {{"name", "scale"},
                     {"seed", 1},
                     {"determinism", "strict"},
                     {"data", {{"dataset", "synthetic"}, {"batch_size", 64}}},
                     {"distributed", {{"nproc_per_node", 2}}}};
  const std::string canonical = json{{"expctl_spec_version", 1}, {"env_profile", nullptr}, {"spec", spec}}.dump();
  const std::string hash = util::sha256_hex(canonical);
  db.put_spec(hash, canonical, "scale");
  return hash;
}

std::string put_environment(store::Store& db) {
  env::Fingerprint fingerprint;
  fingerprint.set("host.os_id", "debian");
  fingerprint.set("host.kernel", "6.1.0-18-amd64");
  fingerprint.set("host.arch", "x86_64");
  const json document = fingerprint.to_json();
  db.put_environment(document.at("hash").get<std::string>(), document.dump());
  return document.at("hash").get<std::string>();
}

// One rank's step times: a run-level factor, AR(1) noise between neighbouring steps, rare stalls.
std::vector<double> step_times(std::int64_t steps, double factor, Normal& normal) {
  std::vector<double> times(static_cast<size_t>(steps));
  double noise = 0;
  for (auto& time : times) {
    noise = 0.8 * noise + 0.6 * normal();
    time = 10.0 * factor * (1 + 0.03 * noise) * (normal() > 3.0 ? 3.0 : 1.0);
  }
  return times;
}

// The loss is the same function of the step on every run: strict determinism holds.
double loss_at(std::int64_t step, int rank) {
  return 2.3 / (1.0 + 1e-4 * static_cast<double>(step)) + 0.01 * std::sin(static_cast<double>(step + 7 * rank));
}

// A timer as the runner's recorder stores it: whole nanoseconds, in milliseconds.
double timer_ms(double ms) {
  return run::stored_milliseconds(ms / 1000.0);
}

void append_rank(store::Store& db, const std::string& run_id, int rank, const std::vector<double>& times,
                 Normal& normal) {
  std::vector<store::MetricPoint> points;
  points.reserve(times.size() * 13);
  for (size_t i = 0; i < times.size(); ++i) {
    const auto step = static_cast<std::int64_t>(i + 1);
    const double time = timer_ms(times[i]);
    const double wait = timer_ms(time * (0.15 + 0.02 * normal()));
    points.push_back({rank, step, "loss", loss_at(step, rank)});
    points.push_back({rank, step, "lr", 0.05});
    points.push_back({rank, step, "grad_scale", 1.0});
    points.push_back({rank, step, "skipped", 0.0});
    points.push_back({rank, step, "step_time_ms", time});
    points.push_back({rank, step, "comm_wait_ms", wait});
    points.push_back({rank, step, "samples_per_sec", run::stored_ratio(64.0 / (time / 1000.0))});
    // The phase timers and straggler score every rank records since issue 11.
    const double compute = time - wait;
    points.push_back({rank, step, "data_wait_ms", timer_ms(0.02 * compute)});
    points.push_back({rank, step, "forward_ms", timer_ms(0.30 * compute)});
    points.push_back({rank, step, "backward_ms", timer_ms(0.55 * compute)});
    points.push_back({rank, step, "optimizer_ms", timer_ms(0.12 * compute)});
    points.push_back({rank, step, "allreduce_bytes", 940000.0});
    points.push_back({rank, step, "straggler_score", run::stored_ratio(1.0 + 0.05 * std::abs(normal()))});
  }
  db.append_metrics(run_id, points);
}

std::string write_long_run(store::Store& db, const Options& options, const std::string& spec,
                           const std::string& environment, int offset_s, double factor, std::uint64_t seed) {
  const auto epoch = store::parse_utc("2026-11-29T00:00:00.000Z").value();
  const auto record = db.create_run({spec, environment, "scale", epoch + std::chrono::seconds(offset_s)});
  Normal normal(seed);
  for (int rank = 0; rank < options.ranks; ++rank) {
    append_rank(db, record.id, rank, step_times(options.steps, factor, normal), normal);
  }
  // The runner's own summary (run/summary.hpp), as `expctl run` writes it when a run ends.
  const auto summary =
      run::compute_summary(db, record.id, {}, 1.0e-2 * static_cast<double>(options.steps), std::nullopt);
  db.set_summary(record.id, compare::to_json(summary).dump());
  db.finish_run(record.id, store::RunStatus::completed, 0, "");
  return record.id;
}

// An earlier run that kept only its summary: a run-level throughput with 3 % run-to-run noise.
void write_history_run(store::Store& db, const std::string& spec, const std::string& environment, int index,
                       Normal& normal, std::int64_t steps) {
  const auto epoch = store::parse_utc("2026-11-28T00:00:00.000Z").value();
  const auto record = db.create_run({spec, environment, "scale", epoch + std::chrono::seconds(600 * index)});
  const double factor = 1 + 0.03 * normal();
  const double time = 10.0 * factor;
  const json summary = {{"samples_per_sec", 2 * 64.0 / (time / 1000.0)},
                        {"step_time_ms_p50", time},
                        {"step_time_ms_p95", time * 1.08},
                        {"comm_wait_fraction", 0.15 + 0.005 * normal()},
                        {"steps", steps},
                        {"warmup_steps", compare::default_warmup_steps(steps)}};
  db.set_summary(record.id, summary.dump());
  db.finish_run(record.id, store::RunStatus::completed, 0, "");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    auto db = store::Store::open(options.db);
    const std::string spec = put_spec(db);
    const std::string environment = put_environment(db);
    Normal normal(99);
    for (int i = 0; i < options.history; ++i) {
      write_history_run(db, spec, environment, i, normal, options.steps);
    }
    std::cout << write_long_run(db, options, spec, environment, 0, 1.0, 1) << "\n";
    std::cout << write_long_run(db, options, spec, environment, 3600, 1.0 + options.slowdown, 2) << "\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "expctl_make_compare_store: error: " << error.what() << "\n";
    return 2;
  }
}
