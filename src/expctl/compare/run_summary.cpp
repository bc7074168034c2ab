#include "expctl/compare/run_summary.hpp"

#include "expctl/util/metric_names.hpp"

namespace expctl::compare {
namespace {

namespace key = util::summary_key;
using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// Takes `name` out of `rest` (so what is left are the others).
json take(json& rest, const char* name) {
  const auto found = rest.find(name);
  if (found == rest.end()) {
    return nullptr;
  }
  json value = std::move(*found);
  rest.erase(found);
  return value;
}

std::optional<double> number(const json& value) {
  return value.is_number() ? std::optional<double>(value.get<double>()) : std::nullopt;
}

std::optional<std::int64_t> integer(const json& value) {
  return value.is_number_integer() ? std::optional<std::int64_t>(value.get<std::int64_t>()) : std::nullopt;
}

}  // namespace

json to_json(const RunSummary& summary) {
  json out = summary.others.is_object() ? summary.others : json::object();
  out[key::final_train_loss] = or_null(summary.final_train_loss);
  out[key::eval_loss] = or_null(summary.eval_loss);
  out[key::eval_accuracy] = or_null(summary.eval_accuracy);
  out[key::samples_per_sec] = or_null(summary.samples_per_sec);
  out[key::step_time_ms_p50] = or_null(summary.step_time_ms_p50);
  out[key::step_time_ms_p95] = or_null(summary.step_time_ms_p95);
  out[key::comm_wait_fraction] = or_null(summary.comm_wait_fraction);
  out[key::loss_curve_sha256] = or_null(summary.loss_curve_sha256);
  out[key::steps] = summary.steps;
  out[key::skipped_steps] = summary.skipped_steps;
  out[key::warmup_steps] = summary.warmup_steps;
  out[key::ranks_recorded] = summary.ranks_recorded;
  out[key::wall_time_s] = or_null(summary.wall_time_s);
  out[key::time_to_first_step_s] = or_null(summary.time_to_first_step_s);
  out[key::invocations] = summary.invocations;
  out[key::phases] = summary.phases;
  out[key::allreduce] = summary.allreduce;
  if (summary.world_size) {
    out[key::world_size] = *summary.world_size;
  }
  if (summary.drift) {
    out[key::drift] = *summary.drift;
  }
  if (summary.skipped_images) {
    out[key::skipped_images] = *summary.skipped_images;
  }
  return out;
}

RunSummary summary_from_json(const json& stored) {
  RunSummary summary;
  json rest = stored.is_object() ? stored : json::object();
  summary.final_train_loss = number(take(rest, key::final_train_loss));
  summary.eval_loss = number(take(rest, key::eval_loss));
  summary.eval_accuracy = number(take(rest, key::eval_accuracy));
  summary.samples_per_sec = number(take(rest, key::samples_per_sec));
  summary.step_time_ms_p50 = number(take(rest, key::step_time_ms_p50));
  summary.step_time_ms_p95 = number(take(rest, key::step_time_ms_p95));
  summary.comm_wait_fraction = number(take(rest, key::comm_wait_fraction));
  if (const json sha = take(rest, key::loss_curve_sha256); sha.is_string()) {
    summary.loss_curve_sha256 = sha.get<std::string>();
  }
  summary.steps = integer(take(rest, key::steps)).value_or(0);
  summary.skipped_steps = integer(take(rest, key::skipped_steps)).value_or(0);
  summary.warmup_steps = integer(take(rest, key::warmup_steps)).value_or(0);
  summary.ranks_recorded = integer(take(rest, key::ranks_recorded)).value_or(0);
  summary.wall_time_s = number(take(rest, key::wall_time_s));
  summary.time_to_first_step_s = number(take(rest, key::time_to_first_step_s));
  summary.invocations = integer(take(rest, key::invocations)).value_or(0);
  if (json phases = take(rest, key::phases); phases.is_array()) {
    summary.phases = std::move(phases);
  }
  if (json allreduce = take(rest, key::allreduce); allreduce.is_string()) {
    summary.allreduce = std::move(allreduce);
  }
  summary.world_size = integer(take(rest, key::world_size));
  if (json drift = take(rest, key::drift); !drift.is_null()) {
    summary.drift = std::move(drift);
  }
  summary.skipped_images = integer(take(rest, key::skipped_images));
  summary.others = std::move(rest);
  return summary;
}

}  // namespace expctl::compare
