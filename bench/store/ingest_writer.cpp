// The live writer of bench/team_store.sh's ingest figure: one run of RANKS ranks, each rank a
// thread on its own connection to the node-local SQLite store, appending METRICS per-step series
// at RATE points per second in all (one transaction per rank every BATCH_MS, as the runner's
// recorder batches), for SECONDS; then the run is finished `completed`. Prints the run id as soon
// as it exists, then, at the end, "<points> <seconds>" (what was written, and how long it took).
//
//   expctl_ingest_writer --db PATH [--ranks 8] [--metrics 8] [--rate 100000] [--seconds 300] [--batch-ms 250]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "expctl/store/store.hpp"
#include "expctl/util/sha256.hpp"

namespace {

using namespace expctl;
using SteadyClock = std::chrono::steady_clock;

struct Options {
  std::string db;
  int ranks = 8;
  int metrics = 8;
  double rate = 100'000;  ///< points per second, all ranks together
  double seconds = 300;
  int batch_ms = 250;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--db")
      options.db = value;
    else if (key == "--ranks")
      options.ranks = std::stoi(value);
    else if (key == "--metrics")
      options.metrics = std::stoi(value);
    else if (key == "--rate")
      options.rate = std::stod(value);
    else if (key == "--seconds")
      options.seconds = std::stod(value);
    else if (key == "--batch-ms")
      options.batch_ms = std::stoi(value);
    else
      throw std::runtime_error("unknown option " + std::string(key) + " (see the comment at the top of the file)");
  }
  if (options.db.empty() || options.ranks < 1 || options.metrics < 1 || options.rate <= 0 || options.seconds <= 0) {
    throw std::runtime_error("--db PATH is required; ranks, metrics, rate and seconds must be positive");
  }
  return options;
}

/// One rank: every BATCH_MS, the steps due since the start, as one append_metrics transaction.
std::int64_t write_rank(const Options& options, const std::string& run_id, int rank, SteadyClock::time_point start) {
  store::Store db = store::Store::open(options.db);
  std::vector<std::string> names;
  for (int metric = 0; metric < options.metrics; ++metric) {
    names.push_back(fmt::format("metric_{:02}", metric));
  }
  const double steps_per_second = options.rate / options.ranks / options.metrics;
  const auto total_steps = static_cast<std::int64_t>(std::llround(steps_per_second * options.seconds));
  std::int64_t written = 0;
  std::vector<store::MetricPoint> points;
  while (written < total_steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options.batch_ms));
    const double elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
    const std::int64_t due = std::min(total_steps, static_cast<std::int64_t>(elapsed * steps_per_second));
    points.clear();
    for (std::int64_t step = written + 1; step <= due; ++step) {
      for (int metric = 0; metric < options.metrics; ++metric) {
        const double value = metric == 0 ? 2.3 / (1.0 + 1e-4 * static_cast<double>(step)) : metric + 0.001 * step;
        points.push_back({rank, step, names[static_cast<std::size_t>(metric)], value});
      }
    }
    if (!points.empty()) {
      db.append_metrics(run_id, points);
    }
    written = std::max(written, due);
  }
  return written * options.metrics;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    auto db = store::Store::open(options.db);
    const std::string canonical = R"({"expctl_spec_version":1,"env_profile":null,"spec":{"name":"ingest"}})";
    const std::string hash = util::sha256_hex(canonical);
    db.put_spec(hash, canonical, "ingest");
    const auto run = db.create_run({hash, std::nullopt, "ingest", std::nullopt});
    for (int rank = 0; rank < options.ranks; ++rank) {
      db.add_rank(run.id, {rank, "bench", std::nullopt, std::nullopt, store::RunStatus::running, {}, {}});
    }
    std::cout << run.id << std::endl;
    const auto start = SteadyClock::now();
    std::vector<std::int64_t> points(static_cast<std::size_t>(options.ranks), 0);
    std::vector<std::thread> threads;
    std::atomic<bool> failed = false;
    for (int rank = 0; rank < options.ranks; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          points[static_cast<std::size_t>(rank)] = write_rank(options, run.id, rank, start);
        } catch (const std::exception& error) {
          std::cerr << fmt::format("expctl_ingest_writer: rank {}: {}\n", rank, error.what());
          failed = true;
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    for (int rank = 0; rank < options.ranks; ++rank) {
      db.update_rank(run.id, rank, failed ? store::RunStatus::failed : store::RunStatus::completed, 0, std::nullopt);
    }
    db.finish_run(run.id, failed ? store::RunStatus::failed : store::RunStatus::completed, failed ? 1 : 0, "");
    const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    std::int64_t total = 0;
    for (const auto count : points) {
      total += count;
    }
    std::cout << total << " " << seconds << std::endl;
    return failed ? 1 : 0;
  } catch (const std::exception& error) {
    std::cerr << "expctl_ingest_writer: error: " << error.what() << "\n";
    return 2;
  }
}
