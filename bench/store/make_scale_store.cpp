// bench/store_scale.sh's store (issue 56): about --points points shaped like training series,
// written straight into a new SQLite store as sealed chunks. The runs, ranks, summaries and ends go
// through the store API; each series is cut into chunks of chunk::k_chunk_points, summarized and
// encoded by the store's own codec (chunk_codec.hpp) on --threads threads, and inserted by
// store::testing::append_sealed_chunks, one transaction a run.
//
// The runs (every one 14 series a rank a step: loss as float32 widened to double, decaying with
// noise; an lr schedule, cosine or stepped; grad_scale; skipped; five phase timers and the step time
// in milliseconds from a nanosecond clock; samples_per_sec; allreduce_bytes and samples_seen
// counters; straggler_score; timers and ratios rounded as the recorder stores them,
// run::stored_milliseconds and run::stored_ratio):
//   long   one run, 1 rank x --long-steps steps (1 000 000): the run page's long series
//   mid    2-rank runs of --mid-steps steps (100 000) of one spec, 60 % of the rest; at least 2
//          (the last two are `compare`'s A and B, with the runner's own summary; their loss and lr
//          are the same series on every one, as strict determinism makes them)
//   short  runs of 1 or 2 ranks x 500-4 000 steps over 40 specs, the rest; some failed or interrupted
// Prints "long ID", "a ID", "b ID", "runs N", "points N", "seconds S" (generation time).
//
//   expctl_make_scale_store --db PATH [--points 1e9] [--threads N] [--long-steps 1000000] [--mid-steps 100000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <numbers>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/compare/comparison.hpp"
#include "expctl/env/fingerprint.hpp"
#include "expctl/run/recorder.hpp"
#include "expctl/run/summary.hpp"
#include "expctl/store/chunk_codec.hpp"
#include "expctl/store/store.hpp"
#include "expctl/store/testing.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/sha256.hpp"

namespace {

using namespace expctl;
using nlohmann::json;
namespace chunk = store::chunk;

struct Options {
  std::string db;
  double points = 1e9;
  unsigned threads = std::max(1U, std::thread::hardware_concurrency());
  std::int64_t long_steps = 1'000'000;
  std::int64_t mid_steps = 100'000;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view key = argv[i];
    if (i + 1 >= argc) {
      throw std::runtime_error("option " + std::string(key) + " needs a value");
    }
    const std::string value = argv[i + 1];
    if (key == "--db")
      options.db = value;
    else if (key == "--points")
      options.points = std::stod(value);
    else if (key == "--threads")
      options.threads = static_cast<unsigned>(std::max(1, std::stoi(value)));
    else if (key == "--long-steps")
      options.long_steps = std::stoll(value);
    else if (key == "--mid-steps")
      options.mid_steps = std::stoll(value);
    else
      throw std::runtime_error("unknown option " + std::string(key) + " (see the comment at the top of the file)");
  }
  if (options.db.empty()) {
    throw std::runtime_error("--db PATH is required");
  }
  return options;
}

// splitmix64: a fast seeded generator, so every machine writes the same store.
class Random {
 public:
  explicit Random(std::uint64_t seed) : m_state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {  // Box-Muller, one of the pair
    return std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform());
  }

 private:
  std::uint64_t m_state;
};

constexpr const char* k_series[] = {util::metric::loss,
                                    util::metric::lr,
                                    util::metric::grad_scale,
                                    util::metric::skipped,
                                    util::metric::step_time_ms,
                                    util::metric::comm_wait_ms,
                                    util::metric::data_wait_ms,
                                    util::metric::forward_ms,
                                    util::metric::backward_ms,
                                    util::metric::optimizer_ms,
                                    util::metric::samples_per_sec,
                                    util::metric::allreduce_bytes,
                                    "samples_seen",
                                    util::metric::straggler_score};
constexpr int k_series_count = static_cast<int>(std::size(k_series));

/// One run to write: its shape and the seed every series of it is drawn from.
struct RunPlan {
  std::string kind;  ///< long, mid, short
  std::string spec;
  int ranks = 1;
  std::int64_t steps = 0;
  std::uint64_t seed = 0;
  store::RunStatus status = store::RunStatus::completed;
  std::string id{};
};

/// A run's speed: its step time over 10 ms, 3 % apart from run to run (uniform: sd 1.7 %).
double step_time_factor(const RunPlan& run) {
  return 0.97 + 0.06 * Random(run.seed * 131).uniform();
}

/// A rank's step times in ms, as a nanosecond clock gives them: AR(1) noise, rare stalls.
std::vector<double> step_times(const RunPlan& run, int rank) {
  Random random(run.seed * 131 + 1 + static_cast<std::uint64_t>(rank));
  const double factor = step_time_factor(run);
  std::vector<double> times(static_cast<std::size_t>(run.steps));
  double noise = 0;
  for (double& time : times) {
    noise = 0.8 * noise + 0.6 * random.normal();
    const double seconds = 0.01 * factor * (1 + 0.03 * noise) * (random.uniform() < 0.001 ? 3.0 : 1.0);
    time = run::stored_milliseconds(seconds);
  }
  return times;
}

/// The values of series `which` of one rank, one per step 1..steps.
std::vector<double> series_values(const RunPlan& run, int rank, int which) {
  const auto n = static_cast<std::size_t>(run.steps);
  const std::string_view name = k_series[which];
  // The mid runs share one spec under strict determinism: their loss and lr are the same series
  // on every run (so `compare` checks them bit for bit over every step); the timers differ.
  const bool model = name == util::metric::loss || name == util::metric::lr;
  const std::uint64_t seed = model && run.kind == "mid" ? 0 : run.seed;
  Random random(seed * 7919 + static_cast<std::uint64_t>(rank) * 31 + static_cast<std::uint64_t>(which));
  std::vector<double> values(n);
  const double steps = static_cast<double>(run.steps);
  const auto phase = [&](double share) {
    const std::vector<double> times = step_times(run, rank);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = run::stored_milliseconds(times[i] / 1000.0 * share * (1 + 0.05 * random.normal()));
    }
  };
  if (name == util::metric::loss) {
    const double start = 2.0 + random.uniform();
    for (std::size_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i + 1);
      const double mean = 0.2 + start / std::sqrt(1.0 + 2e-4 * x);
      values[i] = static_cast<double>(static_cast<float>(mean * (1 + 0.05 * random.normal())));
    }
  } else if (name == util::metric::lr) {
    const bool cosine = seed % 3 == 0;
    const double warmup = std::min(2000.0, steps / 10);
    for (std::size_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(i + 1);
      values[i] = x < warmup ? 0.1 * x / warmup
                  : cosine   ? 0.05 * (1 + std::cos(std::numbers::pi * (x - warmup) / (steps - warmup + 1)))
                             : 0.1 * std::pow(0.1, std::floor(3 * x / (steps + 1)));
    }
  } else if (name == util::metric::grad_scale) {
    double scale = 65536;
    for (double& value : values) {
      scale = random.uniform() < 1e-4 ? scale / 2 : scale;
      value = scale;
    }
  } else if (name == util::metric::skipped) {
    for (double& value : values) {
      value = random.uniform() < 1e-4 ? 1.0 : 0.0;
    }
  } else if (name == util::metric::step_time_ms) {
    values = step_times(run, rank);
  } else if (name == util::metric::comm_wait_ms) {
    phase(0.15);
  } else if (name == util::metric::data_wait_ms) {
    phase(0.02);
  } else if (name == util::metric::forward_ms) {
    phase(0.28);
  } else if (name == util::metric::backward_ms) {
    phase(0.45);
  } else if (name == util::metric::optimizer_ms) {
    phase(0.08);
  } else if (name == util::metric::samples_per_sec) {
    const std::vector<double> times = step_times(run, rank);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = run::stored_ratio(256.0 / (times[i] / 1000.0));
    }
  } else if (name == util::metric::allreduce_bytes) {
    std::fill(values.begin(), values.end(), 94'371'840.0);
  } else if (name == "samples_seen") {
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = 256.0 * static_cast<double>(i + 1);
    }
  } else {  // straggler_score
    for (double& value : values) {
      value = run::stored_ratio(1.0 + 0.05 * std::abs(random.normal()));
    }
  }
  return values;
}

/// One series of one rank cut into sealed chunks, as the store seals them.
store::testing::SealedSeries seal(const RunPlan& run, int rank, int which) {
  const std::vector<double> values = series_values(run, rank, which);
  store::testing::SealedSeries sealed{k_series[which], rank, {}};
  std::vector<std::int64_t> steps;
  std::vector<std::uint64_t> bits;
  for (std::size_t from = 0; from < values.size(); from += static_cast<std::size_t>(chunk::k_chunk_points)) {
    const std::size_t to = std::min(values.size(), from + static_cast<std::size_t>(chunk::k_chunk_points));
    steps.clear();
    bits.clear();
    for (std::size_t i = from; i < to; ++i) {
      steps.push_back(static_cast<std::int64_t>(i + 1));
      bits.push_back(chunk::bits_of(values[i]));
    }
    sealed.chunks.emplace_back(chunk::summarize(steps, bits), chunk::encode(steps, bits));
  }
  return sealed;
}

std::string put_spec(store::Store& db, const std::string& name, int ranks) {
  const json spec = {{"name", name},
                     {"seed", 1},
                     {"data", {{"dataset", "synthetic"}, {"batch_size", 128}}},
                     {"distributed", {{"nproc_per_node", ranks}}}};
  const std::string canonical = json{{"expctl_spec_version", 1}, {"env_profile", nullptr}, {"spec", spec}}.dump();
  const std::string hash = util::sha256_hex(canonical);
  db.put_spec(hash, canonical, name);
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

std::vector<RunPlan> plan(store::Store& db, const Options& options) {
  std::vector<RunPlan> runs;
  const std::int64_t per_mid = 2 * options.mid_steps * k_series_count;
  const double rest = std::max(0.0, options.points - static_cast<double>(options.long_steps * k_series_count));
  const auto mids = std::max<std::int64_t>(2, std::llround(0.6 * rest / static_cast<double>(per_mid)));
  double left = rest - static_cast<double>(mids * per_mid);
  const std::string mid_spec = put_spec(db, "scale-mid", 2);
  std::vector<std::string> short_specs;
  for (int i = 0; i < 40; ++i) {
    short_specs.push_back(put_spec(db, "scale-short-" + std::to_string(i), 1 + i % 2));
  }
  Random random(56);
  std::uint64_t seed = 1;
  // Interleaved in time as a team's store is: short runs between the long ones.
  std::int64_t mid_left = mids;
  const double short_per_mid = std::max(0.0, left) / static_cast<double>(per_mid * mids);
  double short_budget = 0;
  runs.push_back({"long", put_spec(db, "scale-long", 1), 1, options.long_steps, seed++});
  while (mid_left > 0 || left > 0) {
    if (mid_left > 0) {
      runs.push_back({"mid", mid_spec, 2, options.mid_steps, seed++});
      --mid_left;
      short_budget += short_per_mid * static_cast<double>(per_mid);
    } else {
      short_budget = left;
    }
    while (short_budget > 0 && left > 0) {
      const int spec = static_cast<int>(random.next() % short_specs.size());
      const int ranks = 1 + spec % 2;
      const auto steps = static_cast<std::int64_t>(500 + random.next() % 3501);
      const double u = random.uniform();
      const auto status = u < 0.05   ? store::RunStatus::failed
                          : u < 0.08 ? store::RunStatus::interrupted
                                     : store::RunStatus::completed;
      runs.push_back({"short", short_specs[static_cast<std::size_t>(spec)], ranks, steps, seed++, status});
      const auto points = static_cast<double>(steps * ranks * k_series_count);
      short_budget -= points;
      left -= points;
    }
  }
  return runs;
}

/// Encodes the series of `batch` on `threads` threads: series (run, rank, which) by a shared count.
std::vector<std::vector<store::testing::SealedSeries>> encode(const std::vector<RunPlan*>& batch, unsigned threads) {
  struct Unit {
    std::size_t run;
    int rank;
    int which;
  };
  std::vector<Unit> units;
  std::vector<std::vector<store::testing::SealedSeries>> out(batch.size());
  for (std::size_t r = 0; r < batch.size(); ++r) {
    out[r].resize(static_cast<std::size_t>(batch[r]->ranks * k_series_count));
    for (int rank = 0; rank < batch[r]->ranks; ++rank) {
      for (int which = 0; which < k_series_count; ++which) {
        units.push_back({r, rank, which});
      }
    }
  }
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t u = next++; u < units.size(); u = next++) {
      const Unit& unit = units[u];
      out[unit.run][static_cast<std::size_t>(unit.rank * k_series_count + unit.which)] =
          seal(*batch[unit.run], unit.rank, unit.which);
    }
  };
  std::vector<std::jthread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    pool.emplace_back(work);
  }
  work();
  pool.clear();  // joins
  return out;
}

json short_summary(const RunPlan& run) {
  const double time = 10.0 * step_time_factor(run);
  return {{util::summary_key::samples_per_sec, run.ranks * 256.0 / (time / 1000.0)},
          {util::summary_key::step_time_ms_p50, time},
          {util::summary_key::step_time_ms_p95, time * 1.08},
          {util::summary_key::comm_wait_fraction, 0.15},
          {util::summary_key::steps, run.steps},
          {util::summary_key::warmup_steps, compare::default_warmup_steps(run.steps)}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    const auto started = std::chrono::steady_clock::now();
    auto db = store::Store::open(options.db);
    const std::string environment = put_environment(db);
    std::vector<RunPlan> runs = plan(db, options);
    const auto epoch = store::parse_utc("2026-10-01T00:00:00.000Z").value();
    std::int64_t points = 0;
    std::vector<std::string> compared;
    // compare's A and B are the last two mid runs: every other run of their spec is earlier, the
    // history compare reads its run-to-run noise from.
    std::vector<const RunPlan*> last_mids;
    for (const RunPlan& run : runs) {
      if (run.kind == "mid") {
        last_mids.push_back(&run);
      }
    }
    last_mids.erase(last_mids.begin(), last_mids.end() - 2);
    // Batches of about 20 M points (or one longer run): encoded in parallel, then written run by run.
    for (std::size_t first = 0; first < runs.size();) {
      std::vector<RunPlan*> batch;
      std::int64_t batch_points = 0;
      for (; first < runs.size() && (batch.empty() || batch_points < 20'000'000); ++first) {
        batch.push_back(&runs[first]);
        batch_points += runs[first].steps * runs[first].ranks * k_series_count;
      }
      const auto sealed = encode(batch, options.threads);
      for (std::size_t r = 0; r < batch.size(); ++r) {
        RunPlan& run = *batch[r];
        const auto at = epoch + std::chrono::seconds(600 * static_cast<std::int64_t>(&run - runs.data()));
        run.id = db.create_run({run.spec, environment, "scale-" + run.kind, at}).id;
        for (int rank = 0; rank < run.ranks; ++rank) {
          db.add_rank(
              run.id,
              {rank, "node" + std::to_string(rank), 1000 + rank, std::nullopt, store::RunStatus::running, {}, {}});
        }
        store::testing::append_sealed_chunks(db, run.id, sealed[r]);
        const bool failed = run.status != store::RunStatus::completed;
        for (int rank = 0; rank < run.ranks; ++rank) {
          db.update_rank(run.id, rank, run.status, failed ? 1 : 0, std::nullopt);
        }
        if (&run == last_mids[0] || &run == last_mids[1]) {
          // compare's A and B carry the runner's own summary (run/summary.hpp), from their series.
          const auto summary =
              run::compute_summary(db, run.id, {}, 1e-2 * static_cast<double>(run.steps), std::nullopt);
          db.set_summary(run.id, compare::to_json(summary).dump());
          compared.push_back(run.id);
        } else {
          db.set_summary(run.id, short_summary(run).dump());
        }
        db.finish_run(run.id, run.status, failed ? 1 : 0, failed ? "synthetic failure" : "");
        points += run.steps * run.ranks * k_series_count;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << "long " << runs.front().id << "\n"
              << "a " << compared.at(0) << "\n"
              << "b " << compared.at(1) << "\n"
              << "runs " << runs.size() << "\n"
              << "points " << points << "\n"
              << "seconds " << seconds << "\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "expctl_make_scale_store: error: " << error.what() << "\n";
    return 2;
  }
}
