#include "expctl/run/program_protocol.hpp"

#include <cmath>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "expctl/train/records.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

// The one place the values of a line are read: a number, a bool, or a non-finite string.
std::optional<double> number_of(const json& value) {
  if (value.is_number() || value.is_boolean()) {
    return train::decode_number(value);
  }
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "nan" || text == "inf" || text == "-inf") {
      return train::decode_number(value);
    }
  }
  return std::nullopt;
}

tl::expected<std::int64_t, std::string> step_of(const json& value) {
  if (value.is_number_integer()) {
    const auto step = value.get<std::int64_t>();
    if (step >= 0) {
      return step;
    }
  } else if (value.is_number_float()) {
    const double step = value.get<double>();
    if (std::isfinite(step) && step >= 0 && step < 9e15 && std::floor(step) == step) {
      return static_cast<std::int64_t>(step);
    }
  }
  return tl::unexpected(fmt::format("\"step\" must be an integer >= 0, found {}", value.dump()));
}

}  // namespace

std::string quote_non_finite(std::string_view text) {
  static constexpr std::pair<std::string_view, std::string_view> k_tokens[] = {
      {"-Infinity", "\"-inf\""}, {"Infinity", "\"inf\""}, {"NaN", "\"nan\""}};
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (const auto& [token, quoted] : k_tokens) {
      if (text.substr(i, token.size()) == token) {
        out += quoted;
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) {
      out += c;
    }
  }
  return out;
}

tl::expected<ProgramLine, std::string> decode_program_line(std::string_view line) {
  if (line.size() > k_max_program_line) {
    return tl::unexpected(fmt::format("a line of {} bytes, over the {} KiB limit", line.size(), k_max_program_line / 1024));
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  if (line.empty()) {
    return ProgramLine{ProgramLine::Kind::heartbeat, 0, std::nullopt, {}, {}, {}};
  }
  const json record = json::parse(quote_non_finite(line), nullptr, false);
  if (record.is_discarded()) {
    return tl::unexpected(std::string("not JSON"));
  }
  if (!record.is_object()) {
    return tl::unexpected(fmt::format("a JSON {}, not an object", record.type_name()));
  }
  ProgramLine out;
  if (const auto heartbeat = record.find("heartbeat"); heartbeat != record.end() && !record.contains("step")) {
    out.kind = ProgramLine::Kind::heartbeat;
    out.where = heartbeat->is_string() ? heartbeat->get<std::string>() : std::string();
    return out;
  }
  if (const auto modules = record.find("modules"); modules != record.end() && !record.contains("step")) {
    out.kind = ProgramLine::Kind::modules;
    for (const json& file : modules->is_array() ? *modules : json::array()) {
      if (file.is_string()) {
        out.modules.push_back(file.get<std::string>());
      }
    }
    return out;
  }
  const auto step = record.find("step");
  if (step == record.end()) {
    return tl::unexpected(std::string("no \"step\" field"));
  }
  auto step_number = step_of(*step);
  if (!step_number) {
    return tl::unexpected(step_number.error());
  }
  out.step = *step_number;
  for (const auto& [key, value] : record.items()) {
    if (key == "step") {
      continue;
    }
    const auto number = number_of(value);
    if (key == "time") {
      if (number && std::isfinite(*number)) {
        out.time = *number;
      }
    } else if (number && valid_metric_name(key)) {
      out.values.emplace_back(key, *number);
    }
  }
  return out;
}

// Metric names become store series, TensorBoard tags and `compare` columns.
bool valid_metric_name(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return false;
  }
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace expctl::run
