#include "expctl/run/program_gather.hpp"

#include <fmt/format.h>

#include "expctl/run/program_protocol.hpp"
#include "expctl/train/records.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

json optional_int(const std::optional<int>& value) { return value ? json(*value) : json(nullptr); }

std::optional<int> int_of(const json& value) {
  return value.is_null() ? std::nullopt : std::optional<int>(value.get<int>());
}

}  // namespace

std::string part_key(int index) { return fmt::format("expctl/program/part/{}", index); }

std::string part_text(const ProgramPart& part) {
  // Points as columns of one series at a time would be smaller; a part is sent once per run.
  json points = json::array();
  for (const auto& point : part.points) {
    points.push_back({point.rank, point.step, point.name, train::encode_number(point.value)});
  }
  json ranks = json::array();
  for (const auto& rank : part.ranks) {
    ranks.push_back({{"rank", rank.rank},
                     {"status", store::to_string(rank.status)},
                     {"exit_code", optional_int(rank.exit_code)},
                     {"signal", optional_int(rank.signal)},
                     {"host", rank.host},
                     {"pid", rank.pid}});
  }
  return json{{"index", part.index},
              {"points", std::move(points)},
              {"ranks", std::move(ranks)},
              {"root_cause", part.root_cause},
              {"steps_logged", part.steps_logged},
              {"lines_skipped", part.lines_skipped},
              {"log", part.log}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

ProgramPart part_from_text(const std::string& text) {
  const json document = json::parse(text);
  ProgramPart part;
  part.index = document.at("index").get<int>();
  for (const auto& point : document.at("points")) {
    const auto value = train::decode_number(point.at(3));
    if (!value) {
      throw json::type_error::create(302, "not a number", &point);
    }
    part.points.push_back({point.at(0).get<int>(), point.at(1).get<std::int64_t>(), point.at(2).get<std::string>(),
                           *value});
  }
  for (const auto& rank : document.at("ranks")) {
    PartRank row;
    row.rank = rank.at("rank").get<int>();
    const auto status = store::parse_run_status(rank.at("status").get<std::string>());
    if (!status) {
      throw json::type_error::create(302, "not a run status", &rank);
    }
    row.status = *status;
    row.exit_code = int_of(rank.at("exit_code"));
    row.signal = int_of(rank.at("signal"));
    row.host = rank.at("host").get<std::string>();
    row.pid = rank.at("pid").get<std::int64_t>();
    part.ranks.push_back(row);
  }
  part.root_cause = document.at("root_cause").get<std::string>();
  part.steps_logged = document.at("steps_logged").get<std::int64_t>();
  part.lines_skipped = document.at("lines_skipped").get<std::int64_t>();
  part.log = document.at("log").get<std::string>();
  return part;
}

tl::expected<ProgramPart, std::string> checked_part(const std::string& text, int index, int world_size) {
  if (text.size() > k_max_part_bytes) {
    return tl::unexpected(fmt::format("{} bytes, over the {} MiB limit", text.size(), k_max_part_bytes >> 20));
  }
  ProgramPart part;
  try {
    part = part_from_text(text);
  } catch (const json::exception& error) {
    return tl::unexpected(fmt::format("not a part ({})", error.what()));
  }
  const auto in_job = [world_size](int rank) { return rank >= 0 && rank < world_size; };
  if (part.index != index) {
    return tl::unexpected(fmt::format("it names itself part {}", part.index));
  }
  for (const auto& point : part.points) {
    if (!in_job(point.rank) || point.step < 0 || !valid_metric_name(point.name)) {
      return tl::unexpected(
          fmt::format("a point of rank {}, step {}, metric \"{}\" (ranks 0..{}, steps >= 0, names "
                      "of [A-Za-z0-9_./-])",
                      point.rank, point.step, point.name.substr(0, 64), world_size - 1));
    }
  }
  for (const auto& rank : part.ranks) {
    if (!in_job(rank.rank) || rank.pid < 0 || rank.host.size() > 255) {
      return tl::unexpected(fmt::format("a row for rank {} (ranks 0..{})", rank.rank, world_size - 1));
    }
  }
  if (part.log.size() > k_part_log_bytes || part.steps_logged < 0 || part.lines_skipped < 0) {
    return tl::unexpected(std::string("a log or counts out of bounds"));
  }
  return part;
}

}  // namespace expctl::run
