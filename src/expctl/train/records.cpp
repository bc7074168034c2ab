#include "expctl/train/records.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "expctl/util/metric_names.hpp"

namespace expctl::train {
namespace {

using nlohmann::json;

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_inf = std::numeric_limits<double>::infinity();

constexpr StepField k_step_fields[] = {
    {"step", nullptr, 1.0, [](const StepMetrics& m) { return static_cast<double>(m.step); },
     [](StepMetrics& m, double v) { m.step = static_cast<std::int64_t>(v); }},
    {"epoch", nullptr, 1.0, [](const StepMetrics& m) { return static_cast<double>(m.epoch); },
     [](StepMetrics& m, double v) { m.epoch = static_cast<std::int64_t>(v); }},
    {"loss", util::metric::loss, 1.0, [](const StepMetrics& m) { return m.loss; },
     [](StepMetrics& m, double v) { m.loss = v; }},
    {"lr", util::metric::lr, 1.0, [](const StepMetrics& m) { return m.lr; },
     [](StepMetrics& m, double v) { m.lr = v; }},
    {"grad_scale", util::metric::grad_scale, 1.0, [](const StepMetrics& m) { return m.grad_scale; },
     [](StepMetrics& m, double v) { m.grad_scale = v; }},
    {"skipped", util::metric::skipped, 1.0, [](const StepMetrics& m) { return m.skipped ? 1.0 : 0.0; },
     [](StepMetrics& m, double v) { m.skipped = v != 0.0; }},
    {"step_time_s", util::metric::step_time_ms, 1000.0, [](const StepMetrics& m) { return m.step_time_s; },
     [](StepMetrics& m, double v) { m.step_time_s = v; }},
    {"comm_wait_s", util::metric::comm_wait_ms, 1000.0, [](const StepMetrics& m) { return m.comm_wait_s; },
     [](StepMetrics& m, double v) { m.comm_wait_s = v; }},
    {"samples_per_sec", util::metric::samples_per_sec, 1.0, [](const StepMetrics& m) { return m.samples_per_sec; },
     [](StepMetrics& m, double v) { m.samples_per_sec = v; }},
    {"data_wait_s", util::metric::data_wait_ms, 1000.0, [](const StepMetrics& m) { return m.data_wait_s; },
     [](StepMetrics& m, double v) { m.data_wait_s = v; }},
    {"forward_s", util::metric::forward_ms, 1000.0, [](const StepMetrics& m) { return m.forward_s; },
     [](StepMetrics& m, double v) { m.forward_s = v; }},
    {"backward_s", util::metric::backward_ms, 1000.0, [](const StepMetrics& m) { return m.backward_s; },
     [](StepMetrics& m, double v) { m.backward_s = v; }},
    {"optimizer_s", util::metric::optimizer_ms, 1000.0, [](const StepMetrics& m) { return m.optimizer_s; },
     [](StepMetrics& m, double v) { m.optimizer_s = v; }},
    {"allreduce_bytes", util::metric::allreduce_bytes, 1.0, [](const StepMetrics& m) { return m.allreduce_bytes; },
     [](StepMetrics& m, double v) { m.allreduce_bytes = v; }},
};

}  // namespace

std::span<const StepField> step_fields() { return k_step_fields; }

const char* phase_name(Phase phase) {
  static constexpr const char* k_names[] = {"starting", "data",      "forward", "backward", "comm_wait",
                                            "optimizer", "eval", "checkpoint", "finished"};
  const auto index = static_cast<std::size_t>(phase);
  return index < std::size(k_names) ? k_names[index] : "unknown";
}

std::string Beacon::where() const {
  const auto now = static_cast<Phase>(phase.load(std::memory_order_relaxed));
  const int waited = bucket.load(std::memory_order_relaxed);
  std::string text = "step=" + std::to_string(step.load(std::memory_order_relaxed)) + " phase=" + phase_name(now);
  if (now == Phase::comm_wait && waited >= 0) {
    text += " bucket=" + std::to_string(waited);
  }
  return text;
}

json encode_number(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  if (std::isinf(value)) {
    return value > 0 ? "inf" : "-inf";
  }
  return value;
}

std::optional<double> decode_number(const json& value) {
  if (value.is_number()) {
    return value.get<double>();
  }
  if (value.is_boolean()) {
    return value.get<bool>() ? 1.0 : 0.0;
  }
  if (value.is_null()) {
    return k_nan;
  }
  if (!value.is_string()) {
    return std::nullopt;
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text == "nan") {
    return k_nan;
  }
  if (text == "inf" || text == "-inf") {
    return text == "inf" ? k_inf : -k_inf;
  }
  return std::nullopt;
}

json encode_step(const StepMetrics& metrics) {
  json record = {{"t", "step"}};
  for (const auto& field : k_step_fields) {
    record[field.key] = encode_number(field.get(metrics));
  }
  return record;
}

namespace {

// The step and the epoch (the first two fields) are whole numbers an int64 holds: converting
// NaN or 1e300 to one is undefined behaviour (found by fuzz_control_record).
bool counts_fit(std::span<const double> row) {
  static_assert(std::string_view(k_step_fields[0].key) == "step" && std::string_view(k_step_fields[1].key) == "epoch");
  return std::all_of(row.begin(), row.begin() + 2, [](double value) {
    return std::isfinite(value) && std::trunc(value) == value && value >= -0x1p63 && value < 0x1p63;
  });
}

}  // namespace

std::optional<StepMetrics> decode_step(const json& record) {
  std::vector<double> values;
  for (const auto& field : k_step_fields) {
    const auto found = record.find(field.key);
    const auto value = found == record.end() ? std::nullopt : decode_number(*found);
    if (!value) {
      return std::nullopt;
    }
    values.push_back(*value);
  }
  if (!counts_fit(values)) {
    return std::nullopt;
  }
  return step_from_row(values);
}

std::vector<double> step_row(const StepMetrics& metrics) {
  std::vector<double> row;
  row.reserve(std::size(k_step_fields));
  for (const auto& field : k_step_fields) {
    row.push_back(field.get(metrics));
  }
  return row;
}

StepMetrics step_from_row(std::span<const double> row) {
  StepMetrics metrics;
  for (std::size_t i = 0; i < row.size() && i < std::size(k_step_fields); ++i) {
    k_step_fields[i].set(metrics, row[i]);
  }
  return metrics;
}

json encode_row(const StepMetrics& metrics) {
  json row = json::array();
  for (const double value : step_row(metrics)) {
    row.push_back(encode_number(value));
  }
  return row;
}

std::optional<StepMetrics> decode_row(const json& row) {
  if (!row.is_array() || row.size() != std::size(k_step_fields)) {
    return std::nullopt;
  }
  std::vector<double> values;
  for (const auto& item : row) {
    const auto value = decode_number(item);
    if (!value) {
      return std::nullopt;
    }
    values.push_back(*value);
  }
  if (!counts_fit(values)) {
    return std::nullopt;
  }
  return step_from_row(values);
}

json encode_eval(const EvalMetrics& metrics) {
  json record = {{"t", "eval"}, {"step", metrics.step}, {"loss", encode_number(metrics.loss)}};
  if (metrics.accuracy) {
    record["accuracy"] = encode_number(*metrics.accuracy);
  }
  if (!metrics.precision.empty()) {
    record["precision"] = metrics.precision;
  }
  if (!metrics.fallback.empty()) {
    record["fallback"] = metrics.fallback;
  }
  return record;
}

std::optional<EvalMetrics> decode_eval(const json& record) {
  const auto loss = decode_number(record.value("loss", json()));
  const auto accuracy = record.contains("accuracy") ? decode_number(record["accuracy"]) : std::nullopt;
  if (!record.contains("step") || !record["step"].is_number_integer() || !loss ||
      (record.contains("accuracy") && !accuracy)) {
    return std::nullopt;
  }
  EvalMetrics metrics{record["step"].get<std::int64_t>(), *loss, accuracy};
  const auto text = [&record](const char* key) {
    const auto found = record.find(key);
    return found != record.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  metrics.precision = text("precision");
  metrics.fallback = text("fallback");
  return metrics;
}

}  // namespace expctl::train
