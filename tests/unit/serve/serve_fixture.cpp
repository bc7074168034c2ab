// Builds stores for expctl serve's tests and bench (tests/unit/serve, tests/browser, bench/serve.sh).
//   expctl_serve_fixture store DB HOSTILE.json   the test store; prints {"alpha": id, ...} as JSON
//   expctl_serve_fixture live DB STEPS MS        a running run that gains a step every MS ms
//   expctl_serve_fixture big DB STEPS            2 ranks x STEPS steps with a one-step loss spike
//   expctl_serve_fixture many DB N               N short runs
//   expctl_serve_fixture sweep DB SWEEP.yaml     a completed run of each point of the sweep but the
//                                                last (its summary's loss and accuracy follow optim.lr)
//   expctl_serve_fixture wide DB SERIES STEPS    one run of 2 ranks x STEPS steps of SERIES series
//                                                (loss, then series_1 ...); prints its id
//   expctl_serve_fixture seeds DB N STEPS        N runs of one spec but the seed, 1 rank x STEPS
//                                                steps of loss each; prints their ids as JSON
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "expctl/store/store.hpp"
#include "expctl/sweep/plan.hpp"
#include "expctl/sweep/sweep.hpp"
#include "expctl/util/sha256.hpp"

using namespace expctl;

namespace {

std::string add_spec(store::Store& db, const std::string& name, int max_steps) {
  const std::string canonical = nlohmann::json{{"format", "expctl-spec-v1"},
                                               {"name", name},
                                               {"spec", {{"name", name}, {"train", {{"max_steps", max_steps}}}}}}
                                    .dump();
  const std::string hash = util::sha256_hex(canonical);
  db.put_spec(hash, canonical, name);
  return hash;
}

/// A spec with a seed and a learning rate: runs of one (name, lr) and several seeds are one
/// configuration over seeds.
std::string add_seeded_spec(store::Store& db, const std::string& name, int seed, double lr, int max_steps) {
  const nlohmann::json values = {
      {"name", name}, {"seed", seed}, {"optim", {{"lr", lr}}}, {"train", {{"max_steps", max_steps}}}};
  const std::string canonical = nlohmann::json{{"format", "expctl-spec-v1"}, {"name", name}, {"spec", values}}.dump();
  const std::string hash = util::sha256_hex(canonical);
  db.put_spec(hash, canonical, name);
  return hash;
}

/// The loss of seed `seed` of the seed groups at `step` (the browser test recomputes their mean).
double seed_loss(std::int64_t step, int seed, double lr) {
  return 2.0 * std::exp(-static_cast<double>(step) * lr) + 0.05 * seed +
         0.02 * std::sin(static_cast<double>(step) * seed);
}

/// Step `step` of `rank`: loss, samples/s, step time and phase timers.
void add_step(std::vector<store::MetricPoint>& points, int rank, std::int64_t step, double loss, double seed) {
  const double step_ms = 20.0 + 2.0 * rank + std::sin(static_cast<double>(step) * 0.1 + seed);
  points.push_back({rank, step, "loss", loss});
  points.push_back({rank, step, "samples_per_sec", 64.0 / step_ms * 1000.0});
  points.push_back({rank, step, "step_time_ms", step_ms});
  points.push_back({rank, step, "data_wait_ms", step_ms * 0.1});
  points.push_back({rank, step, "forward_ms", step_ms * 0.3});
  points.push_back({rank, step, "backward_ms", step_ms * 0.4});
  points.push_back({rank, step, "comm_wait_ms", step_ms * 0.1});
  points.push_back({rank, step, "optimizer_ms", step_ms * 0.05});
  points.push_back(
      {rank, step, "straggler_score", rank == 1 ? 1.05 + 0.05 * std::sin(static_cast<double>(step) * 0.05) : 0.97});
}

double loss_at(std::int64_t step, double seed) {
  return 2.3 * std::exp(-static_cast<double>(step) / 150.0) + 0.1 + 0.01 * std::sin(static_cast<double>(step) + seed);
}

std::string trained_run(store::Store& db, const std::string& spec, const std::string& name, int steps, double seed,
                        store::RunStatus status = store::RunStatus::completed, const std::string& cause = "") {
  const auto run = db.create_run({spec, std::nullopt, name, std::nullopt});
  std::vector<store::MetricPoint> points;
  for (int rank = 0; rank < 2; ++rank) {
    db.add_rank(run.id, {.rank = rank, .host = "node-a", .pid = 100 + rank});
    for (int step = 1; step <= steps; ++step) {
      add_step(points, rank, step, loss_at(step, seed) + 0.001 * rank, seed);
    }
  }
  db.append_metrics(run.id, points);
  if (status != store::RunStatus::running) {
    for (int rank = 0; rank < 2; ++rank) {
      db.update_rank(run.id, rank, status, status == store::RunStatus::completed ? 0 : 1, std::nullopt);
    }
    db.set_summary(run.id, nlohmann::json{{"steps", steps}, {"final_train_loss", loss_at(steps, seed)},
                                          {"samples_per_sec", 3000.0 + seed}}
                               .dump());
    db.finish_run(run.id, status, status == store::RunStatus::completed ? 0 : 1, cause);
  }
  return run.id;
}

std::string tag_of(const std::string& text) {
  std::string tag;
  for (const char c : text) {
    tag += (c == ',' || static_cast<unsigned char>(c) <= ' ' || c == '\x7f') ? '_' : c;
  }
  return tag.substr(0, 200);
}

int make_store(const std::string& path, const std::string& hostile_file) {
  std::ifstream in(hostile_file);
  const auto hostile = nlohmann::json::parse(in).get<std::vector<std::string>>();
  store::Store db = store::Store::open(path);
  const std::string spec = add_spec(db, "fixture", 300);
  nlohmann::json out;
  out["alpha"] = trained_run(db, spec, "alpha", 300, 0.0);
  db.add_tag(out["alpha"], "baseline");
  out["beta"] = trained_run(db, spec, "beta", 300, 1.0);
  out["failed"] = trained_run(db, spec, "gamma", 40, 2.0, store::RunStatus::failed,
                              "rank 1 exited with code 1 (see logs/rank-1.log)");
  out["hostile"] = nlohmann::json::array();
  nlohmann::json summary = nlohmann::json::object();
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    const std::string& text = hostile[i];
    const auto run = db.create_run({spec, std::nullopt, text, std::nullopt});
    db.add_tag(run.id, tag_of(text));
    std::vector<store::MetricPoint> points;
    for (int step = 1; step <= 5; ++step) {
      points.push_back({0, step, text, static_cast<double>(step)});
      points.push_back({0, step, "loss", loss_at(step, static_cast<double>(i))});
    }
    db.append_metrics(run.id, points);
    db.set_summary(run.id, nlohmann::json{{text, text}}.dump());
    db.finish_run(run.id, i % 2 == 0 ? store::RunStatus::failed : store::RunStatus::completed, i % 2, 
                  hostile[(i + 1) % hostile.size()]);
    out["hostile"].push_back(run.id);
    summary[text] = text;
  }
  // A program's run: series of its own (two ranks), eval points on rank 0 and the supervisor's
  // system samples, none of them a trainer's per-step set.
  {
    const auto run = db.create_run({spec, std::nullopt, "program", std::nullopt});
    std::vector<store::MetricPoint> points;
    for (int rank = 0; rank < 2; ++rank) {
      db.add_rank(run.id, {.rank = rank, .host = "node-a", .pid = 400 + rank});
      for (int step = 1; step <= 200; ++step) {
        points.push_back({rank, step, "loss", loss_at(step, 5.0)});
        points.push_back({rank, step, "reward", 0.5 * step + rank});
        points.push_back({rank, step, "kl_divergence", 0.01 * (step % 17) + 0.1 * rank});
        if (step % 10 == 0) {
          points.push_back({rank, step, "sys_cpu_percent", 95.0 + rank});
          points.push_back({rank, step, "sys_rss_mb", 800.0 + step});
        }
        if (rank == 0 && step % 50 == 0) {
          points.push_back({0, step, "eval_accuracy", 0.5 + step / 1000.0});
        }
        points.push_back({rank, step, "data_wait_ms", 1.0});  // a phase timer: not charted by default
      }
    }
    db.append_metrics(run.id, points);
    for (int rank = 0; rank < 2; ++rank) {
      db.update_rank(run.id, rank, store::RunStatus::completed, 0, std::nullopt);
    }
    db.finish_run(run.id, store::RunStatus::completed, 0, "");
    out["program"] = run.id;
  }
  // Two groups over seeds, tagged as `expctl ab` tags its sides: 3 seeds at lr 0.01 (A), 3 at 0.02 (B).
  for (const auto& [side, lr] :
       {std::pair<std::string, double>{"a", 0.01}, std::pair<std::string, double>{"b", 0.02}}) {
    nlohmann::json ids = nlohmann::json::array();
    for (int seed = 1; seed <= 3; ++seed) {
      const std::string hash = add_seeded_spec(db, "seeded", seed, lr, 300);
      const auto run = db.create_run({hash, std::nullopt, "seeded-" + side + "-" + std::to_string(seed), std::nullopt});
      std::vector<store::MetricPoint> points;
      for (int step = 1; step <= 300; ++step) {
        points.push_back({0, step, "loss", seed_loss(step, seed, lr)});
        if (step % 100 == 0) {
          points.push_back({0, step, "eval_accuracy", 0.6 + 0.01 * seed + lr});
        }
      }
      db.append_metrics(run.id, points);
      db.add_tag(run.id, "ab:fixture");
      db.add_tag(run.id, "ab:fixture:" + side);
      db.set_summary(run.id, nlohmann::json{{"final_train_loss", seed_loss(300, seed, lr)}}.dump());
      db.finish_run(run.id, store::RunStatus::completed, 0, "");
      ids.push_back(run.id);
    }
    out["seeds_" + side] = std::move(ids);
  }
  const auto all = db.create_run({spec, std::nullopt, "every hostile string", std::nullopt});
  db.set_summary(all.id, summary.dump());
  db.finish_run(all.id, store::RunStatus::failed, 1, hostile.front());
  out["all_hostile"] = all.id;
  std::cout << out.dump() << std::endl;
  return 0;
}

int live_run(const std::string& path, int steps, int interval_ms) {
  store::Store db = store::Store::open(path);
  const std::string spec = add_spec(db, "live", steps);
  const auto run = db.create_run({spec, std::nullopt, "live", std::nullopt});
  for (int rank = 0; rank < 2; ++rank) {
    db.add_rank(run.id, {.rank = rank, .host = "node-a", .pid = 200 + rank});
  }
  std::cout << run.id << std::endl;
  for (int step = 1; step <= steps; ++step) {
    std::vector<store::MetricPoint> points;
    for (int rank = 0; rank < 2; ++rank) {
      add_step(points, rank, step, loss_at(step, 3.0), 3.0);
    }
    db.append_metrics(run.id, points);
    db.heartbeat(run.id);
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  for (int rank = 0; rank < 2; ++rank) {
    db.update_rank(run.id, rank, store::RunStatus::completed, 0, std::nullopt);
  }
  db.finish_run(run.id, store::RunStatus::completed, 0, "");
  return 0;
}

int big_run(const std::string& path, std::int64_t steps) {
  store::Store db = store::Store::open(path);
  const std::string spec = add_spec(db, "big", static_cast<int>(steps));
  const auto run = db.create_run({spec, std::nullopt, "big", std::nullopt});
  for (int rank = 0; rank < 2; ++rank) {
    db.add_rank(run.id, {.rank = rank, .host = "node-a", .pid = 300 + rank});
  }
  std::vector<store::MetricPoint> points;
  const std::int64_t chunk = 100'000;
  for (std::int64_t from = 1; from <= steps; from += chunk) {
    points.clear();
    for (int rank = 0; rank < 2; ++rank) {
      for (std::int64_t step = from; step < from + chunk && step <= steps; ++step) {
        const double loss = step == steps / 2 ? 50.0 : 1.0 + 0.1 * std::sin(static_cast<double>(step) * 1e-4);
        points.push_back({rank, step, "loss", loss});
        points.push_back({rank, step, "step_time_ms", 20.0});
        points.push_back({rank, step, "samples_per_sec", 3200.0});
      }
    }
    db.append_metrics(run.id, points);
  }
  db.finish_run(run.id, store::RunStatus::completed, 0, "");
  std::cout << run.id << std::endl;
  return 0;
}

int wide_run(const std::string& path, int series, std::int64_t steps) {
  store::Store db = store::Store::open(path);
  const std::string spec = add_spec(db, "wide", static_cast<int>(steps));
  const auto run = db.create_run({spec, std::nullopt, "wide", std::nullopt});
  for (int rank = 0; rank < 2; ++rank) {
    db.add_rank(run.id, {.rank = rank, .host = "node-a", .pid = 500 + rank});
  }
  std::vector<store::MetricPoint> points;
  const std::int64_t chunk = 20'000;
  for (int s = 0; s < series; ++s) {
    const std::string name = s == 0 ? "loss" : "series_" + std::to_string(s);
    for (std::int64_t from = 1; from <= steps; from += chunk) {
      points.clear();
      for (int rank = 0; rank < 2; ++rank) {
        for (std::int64_t step = from; step < from + chunk && step <= steps; ++step) {
          points.push_back({rank, step, name, 1.0 + s + 0.1 * std::sin(static_cast<double>(step) * 1e-3 + rank)});
        }
      }
      db.append_metrics(run.id, points);
    }
  }
  db.finish_run(run.id, store::RunStatus::completed, 0, "");
  std::cout << run.id << std::endl;
  return 0;
}

int seed_runs(const std::string& path, int count, std::int64_t steps) {
  store::Store db = store::Store::open(path);
  nlohmann::json ids = nlohmann::json::array();
  std::vector<store::MetricPoint> points;
  for (int seed = 1; seed <= count; ++seed) {
    const std::string hash = add_seeded_spec(db, "seeds", seed, 1e-4, static_cast<int>(steps));
    const auto run = db.create_run({hash, std::nullopt, "seed-" + std::to_string(seed), std::nullopt});
    points.clear();
    for (std::int64_t step = 1; step <= steps; ++step) {
      points.push_back({0, step, "loss", seed_loss(step, seed, 1e-4)});
    }
    db.append_metrics(run.id, points);
    db.finish_run(run.id, store::RunStatus::completed, 0, "");
    ids.push_back(run.id);
  }
  std::cout << ids.dump() << std::endl;
  return 0;
}

int many_runs(const std::string& path, int count) {
  store::Store db = store::Store::open(path);
  const std::string spec = add_spec(db, "many", 10);
  for (int i = 0; i < count; ++i) {
    const auto run = db.create_run({spec, std::nullopt, "run-" + std::to_string(i), std::nullopt});
    db.add_tag(run.id, i % 10 == 0 ? "tenth" : "other");
    std::vector<store::MetricPoint> points;
    for (int step = 1; step <= 10; ++step) {
      points.push_back({0, step, "loss", loss_at(step, i)});
    }
    db.append_metrics(run.id, points);
    db.finish_run(run.id, i % 7 == 0 ? store::RunStatus::failed : store::RunStatus::completed, i % 7 == 0, "");
  }
  return 0;
}

int sweep_runs(const std::string& path, const std::string& file) {
  store::Store db = store::Store::open(path);
  const sweep::Sweep sweep = sweep::load_sweep(file);
  for (std::size_t i = 0; i + 1 < sweep.points.size(); ++i) {
    const auto& spec = sweep.points[i].spec;
    db.put_spec(spec.hash(), spec.canonical(), sweep.name);
    const auto run = db.create_run({spec.hash(), std::nullopt, sweep.name + "-" + std::to_string(i), std::nullopt});
    // The tags `expctl sweep` gives its points' runs (a 64-hex hash among them).
    for (const std::string& tag : {sweep::name_tag(sweep), sweep::hash_tag(sweep), sweep::point_tag(sweep.points[i])}) {
      db.add_tag(run.id, tag);
    }
    double lr = 0.1;
    double seed = 0.0;
    for (const auto& axis : sweep.points[i].axes) {
      (axis.path == "seed" ? seed : lr) = axis.value.get<double>();  // the sweep of the tests: optim.lr and seeds
    }
    db.set_summary(run.id, nlohmann::json{{"final_train_loss", 0.2 + std::abs(std::log10(lr) + 1.0) + 0.01 * seed},
                                          {"eval_accuracy", 0.9 - 0.1 * std::abs(std::log10(lr) + 1.0)}}
                               .dump());
    db.finish_run(run.id, store::RunStatus::completed, 0, "");
  }
  std::cout << nlohmann::json{{"name", sweep.name}, {"points", sweep.points.size()}}.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 3 && args[0] == "store") {
      return make_store(args[1], args[2]);
    }
    if (args.size() == 4 && args[0] == "live") {
      return live_run(args[1], std::stoi(args[2]), std::stoi(args[3]));
    }
    if (args.size() == 3 && args[0] == "big") {
      return big_run(args[1], std::stoll(args[2]));
    }
    if (args.size() == 4 && args[0] == "wide") {
      return wide_run(args[1], std::stoi(args[2]), std::stoll(args[3]));
    }
    if (args.size() == 4 && args[0] == "seeds") {
      return seed_runs(args[1], std::stoi(args[2]), std::stoll(args[3]));
    }
    if (args.size() == 3 && args[0] == "many") {
      return many_runs(args[1], std::stoi(args[2]));
    }
    if (args.size() == 3 && args[0] == "sweep") {
      return sweep_runs(args[1], args[2]);
    }
  } catch (const std::exception& error) {
    std::cerr << "expctl_serve_fixture: " << error.what() << '\n';
    return 1;
  }
  std::cerr << "usage: expctl_serve_fixture store DB HOSTILE.json | live DB STEPS MS | big DB STEPS | many DB N | "
               "sweep DB SWEEP.yaml | wide DB SERIES STEPS | seeds DB N STEPS\n";
  return 2;
}
