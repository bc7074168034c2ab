// Reading runs for compare: specs, environments, summaries and per-step series from the store,
// the history of earlier runs, and the run values of timing metrics.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include "expctl/compare/comparison.hpp"
#include "expctl/env/env_vars.hpp"
#include "expctl/spec/program.hpp"
#include "expctl/spec/resolved_file.hpp"
#include "expctl/util/metric_names.hpp"
#include "expctl/util/sha256.hpp"

namespace expctl::compare {

using nlohmann::json;

namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

json parse_object(const std::string& text) {
  json value = json::parse(text, nullptr, false);
  return value.is_discarded() || !value.is_object() ? json::object() : value;
}

// The runner's warm-up rule (docs/run.md) when a summary predates the warmup_steps field.
std::int64_t warmup_of(const json& summary, std::int64_t steps) {
  if (const auto found = summary.find(util::summary_key::warmup_steps);
      found != summary.end() && found->is_number_integer()) {
    return found->get<std::int64_t>();
  }
  return default_warmup_steps(steps);
}

json resolved_spec(const store::RunRecord& run) {
  auto spec = spec::read_resolved_spec(run.run_dir / spec::k_resolved_file);
  if (!spec) {
    return nullptr;
  }
  if (const json::json_pointer env("/program/env"); spec->contains(env)) {
    env::mask_variables((*spec)[env]);  // reports show it masked, as the stored spec holds it
  }
  return std::move(*spec);
}

bool has_number(const json& summary, std::string_view name) {
  const auto found = summary.find(std::string(name));
  return found != summary.end() && found->is_number();
}

std::vector<store::MetricPoint> to_points(const std::vector<store::SeriesColumns>& ranks) {
  std::vector<store::MetricPoint> points;
  for (const auto& rank : ranks) {
    for (size_t i = 0; i < rank.steps.size(); ++i) points.push_back({rank.rank, rank.steps[i], {}, rank.values[i]});
  }
  return points;
}

// The aggregate over ranks of one step: the sum (throughput) or the maximum (times).
double combine_step(const std::vector<store::SeriesColumns>& ranks, size_t index, bool sum) {
  double value = k_nan;
  for (const auto& rank : ranks) {
    const double x = rank.values[index];
    if (std::isfinite(x)) {
      value = std::isnan(value) ? x : sum ? value + x : std::max(value, x);
    }
  }
  return value;
}

// Per-step aggregate over ranks of column reads (step_samples' rule, without warm-up: the reads
// start after it). Ranks that logged the same steps (the usual case) are combined index by index;
// anything else goes through step_samples' merge by step.
std::vector<double> combine_ranks(const std::vector<store::SeriesColumns>& ranks, bool sum) {
  if (ranks.empty()) {
    return {};
  }
  const bool aligned = std::all_of(ranks.begin(), ranks.end(),
                                   [&](const store::SeriesColumns& rank) { return rank.steps == ranks[0].steps; });
  if (!aligned) {
    return step_samples(to_points(ranks), std::numeric_limits<std::int64_t>::min(), sum);
  }
  std::vector<double> combined;
  combined.reserve(ranks[0].steps.size());
  for (size_t i = 0; i < ranks[0].steps.size(); ++i) {
    if (const double value = combine_step(ranks, i, sum); !std::isnan(value))
      combined.push_back(value);
  }
  return combined;
}

void load_loss(const store::Store& store, RunData& data) {
  data.loss_ranks = store.series_columns(data.record.id, k_loss_series);
  for (const auto& rank : data.loss_ranks) {
    if (rank.rank == 0) {
      data.loss_steps = rank.steps;
      data.loss = rank.values;
    }
  }
}

// Σ over ranks of a series' sums after warm-up, by SQLite; nullopt when the run has no such series.
std::optional<double> total(const store::Store& store, const std::string& run_id, const char* series,
                            std::int64_t warmup) {
  const auto ranks = store.series_aggregates(run_id, series, warmup);
  if (ranks.empty()) {
    return std::nullopt;
  }
  double sum = 0;
  for (const auto& rank : ranks) sum += rank.sum;
  return sum;
}

// The run values the summary lacks (older runs, hand-made stores), from the stored series.
void load_timing_fallbacks(const store::Store& store, RunData& data, std::int64_t warmup) {
  if (!has_number(data.summary, util::summary_key::step_time_ms_p50) ||
      !has_number(data.summary, util::summary_key::step_time_ms_p95)) {
    data.samples[k_step_time_series] =
        combine_ranks(store.series_columns(data.record.id, k_step_time_series, warmup), false);
  }
  if (!has_number(data.summary, k_comm_wait_fraction_series)) {
    // The runner's definition: Σ comm_wait_ms / Σ step_time_ms over every rank's steps after warm-up.
    const auto waits = total(store, data.record.id, k_comm_wait_series, warmup);
    const auto times = total(store, data.record.id, k_step_time_series, warmup);
    if (waits && times && *times > 0) {
      data.computed[k_comm_wait_fraction_series] = *waits / *times;
    }
  }
}

std::string configuration_of(const store::RunRecord& run) {
  return run.spec_hash + "/" + run.environment_hash.value_or("");
}

// Completed runs of one configuration that started no later than `latest`, other than `excluded`.
std::vector<store::RunRecord> earlier_runs(const store::Store& store, const store::RunRecord& like,
                                           const std::string& latest, const std::set<std::string>& excluded,
                                           size_t limit) {
  std::vector<store::RunRecord> runs;
  for (auto& run : store.list_runs({.status = store::RunStatus::completed, .spec_hash_prefix = like.spec_hash})) {
    if (runs.size() < limit && run.spec_hash == like.spec_hash && run.environment_hash == like.environment_hash &&
        run.started_at <= latest && !excluded.contains(run.id)) {
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace

std::string loss_curve_sha256(const std::vector<double>& losses) {
  std::string bytes;
  bytes.reserve(losses.size() * 4);
  for (const double loss : losses) {
    const auto value = static_cast<float>(loss);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int shift = 0; shift < 32; shift += 8) {
      bytes.push_back(static_cast<char>((bits >> shift) & 0xFFU));  // little-endian on any host
    }
  }
  return util::sha256_hex(bytes);
}

std::int64_t default_warmup_steps(std::int64_t steps) {
  return std::min<std::int64_t>(10, steps / 10);
}

std::vector<double> step_samples(const std::vector<store::MetricPoint>& points, std::int64_t warmup, bool sum) {
  std::map<std::int64_t, double> per_step;
  for (const auto& point : points) {
    if (point.step <= warmup || !std::isfinite(point.value)) {
      continue;
    }
    auto [slot, inserted] = per_step.try_emplace(point.step, point.value);
    if (!inserted) {
      slot->second = sum ? slot->second + point.value : std::max(slot->second, point.value);
    }
  }
  std::vector<double> values;
  values.reserve(per_step.size());
  for (const auto& [step, value] : per_step) {
    values.push_back(value);
  }
  return values;
}

std::vector<double> wait_fraction_samples(const std::vector<store::MetricPoint>& waits,
                                          const std::vector<store::MetricPoint>& times, std::int64_t warmup) {
  std::map<std::int64_t, std::pair<double, double>> per_step;  // step -> (wait, time)
  for (const auto& point : waits) {
    if (point.step > warmup && std::isfinite(point.value)) {
      per_step[point.step].first += point.value;
    }
  }
  for (const auto& point : times) {
    if (point.step > warmup && std::isfinite(point.value)) {
      per_step[point.step].second += point.value;
    }
  }
  std::vector<double> fractions;
  for (const auto& [step, totals] : per_step) {
    if (totals.second > 0) {
      fractions.push_back(totals.first / totals.second);
    }
  }
  return fractions;
}

RunData history_run(const store::RunRecord& run) {
  RunData data;
  data.record = run;
  data.summary = parse_object(run.summary_json);
  return data;
}

RunData load_run(const store::Store& store, const store::RunRecord& run, const LoadOptions& options) {
  RunData data = history_run(run);
  if (const auto spec = store.spec(run.spec_hash)) {
    const json canonical = parse_object(spec->canonical);
    data.spec = canonical.value("spec", json::object());
    data.env_profile = canonical.value("env_profile", json());
  }
  if (json full = resolved_spec(run); full.is_object()) {
    data.spec = std::move(full);
  }
  data.spec = spec::applicable_values(std::move(data.spec));  // a program run's: no trainer sections
  if (run.environment_hash) {
    if (const auto text = store.environment(*run.environment_hash)) {
      data.fingerprint = parse_object(*text);
    }
  }
  load_loss(store, data);
  const std::int64_t warmup = warmup_of(data.summary, static_cast<std::int64_t>(data.loss.size()));
  data.samples[k_throughput_series] = combine_ranks(store.series_columns(run.id, k_throughput_series, warmup), true);
  load_timing_fallbacks(store, data, warmup);
  data.phases = run_phases(store, run.id, data.summary);  // the summary history_run parsed
  if (options.straggler_timeline) {
    data.straggler = straggler_timeline(store, run.id);
  }
  return data;
}

std::vector<RunData> load_runs(const store::Store& store, const std::vector<store::RunRecord>& records,
                               const LoadOptions& options) {
  constexpr size_t k_most_threads = 4;
  const size_t wanted =
      std::min({records.size(), size_t{std::max(1U, std::thread::hardware_concurrency())}, k_most_threads});
  std::vector<store::Store> readers;
  for (size_t i = 1; i < wanted; ++i) {
    std::optional<store::Store> reader;
    try {
      reader = store.open_reader();
    } catch (const store::Error&) {
      // too many connections, say: the loads share the connections that did open
    }
    if (!reader) {
      break;
    }
    readers.push_back(std::move(*reader));
  }
  std::vector<std::optional<RunData>> loaded(records.size());
  std::vector<std::exception_ptr> failures(records.size());
  std::atomic<size_t> next{0};
  const auto work = [&](const store::Store& reader) {
    for (size_t i = next++; i < records.size(); i = next++) {
      try {
        loaded[i] = load_run(reader, records[i], options);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    for (const auto& reader : readers) {
      threads.emplace_back([&] { work(reader); });
    }
    work(store);
  }
  std::vector<RunData> runs;
  runs.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (failures[i]) {
      std::rethrow_exception(failures[i]);
    }
    runs.push_back(std::move(*loaded[i]));
  }
  return runs;
}

std::pair<std::vector<RunData>, std::vector<RunData>> load_both(const store::Store& store,
                                                                const std::vector<store::RunRecord>& a,
                                                                const std::vector<store::RunRecord>& b,
                                                                const LoadOptions& options) {
  auto records = a;
  records.insert(records.end(), b.begin(), b.end());
  auto runs = load_runs(store, records, options);
  std::vector<RunData> runs_b(std::make_move_iterator(runs.begin() + std::ssize(a)),
                              std::make_move_iterator(runs.end()));
  runs.erase(runs.begin() + std::ssize(a), runs.end());
  return {std::move(runs), std::move(runs_b)};
}

std::vector<RunData> load_history(const store::Store& store, const std::vector<RunData>& a,
                                  const std::vector<RunData>& b, const HistoryOptions& options) {
  std::set<std::string> compared;
  std::string latest;
  for (const auto* side : {&a, &b}) {
    for (const auto& run : *side) {
      compared.insert(run.record.id);
      latest = std::max(latest, run.record.started_at);
    }
  }
  std::set<std::string> configurations;
  std::vector<RunData> history;
  for (const auto* side : {&a, &b}) {
    const auto& first = side->front().record;
    if (!first.environment_hash || !configurations.insert(configuration_of(first)).second) {
      continue;
    }
    for (const auto& run : earlier_runs(store, first, latest, compared, options.limit)) {
      history.push_back(history_run(run));
    }
  }
  return history;
}

double run_value(const RunData& run, const MetricInfo& metric) {
  if (has_number(run.summary, metric.name)) {
    return run.summary.at(std::string(metric.name)).get<double>();
  }
  if (const auto found = run.computed.find(std::string(metric.name)); found != run.computed.end()) {
    return found->second;
  }
  const bool wait = metric.name == k_comm_wait_fraction_series;
  const auto found = run.samples.find(wait ? std::string(k_comm_wait_fraction_series) : std::string(metric.series));
  if (found == run.samples.end() || found->second.empty()) {
    return k_nan;
  }
  // The runner's own statistics: the median or p95 of the per-step samples; for the wait share
  // (hand-built runs with per-step shares only) their mean.
  if (wait) {
    return mean(found->second);
  }
  return metric.statistic == Statistic::p95 ? percentile(found->second, 95) : median(found->second);
}

std::vector<std::vector<double>> values_by_configuration(const std::vector<RunData>& runs, const MetricInfo& metric) {
  std::vector<std::string> keys;
  std::vector<std::vector<double>> groups;
  for (const auto& run : runs) {
    const std::string key = configuration_of(run.record);
    const auto index = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    if (index == keys.size()) {
      keys.push_back(key);
      groups.emplace_back();
    }
    groups[index].push_back(run_value(run, metric));
  }
  return groups;
}

}  // namespace expctl::compare
