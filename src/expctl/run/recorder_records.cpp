// A rank's control-channel records (the wire format of train::RecordEncoder) decoded into the
// recorder's typed calls: every field is read with its type checked, and a record of another
// shape is dropped (fuzz_control_record).

#include <algorithm>
#include <limits>

#include "expctl/run/recorder.hpp"
#include "expctl/train/records.hpp"

namespace expctl::run {
namespace {

using nlohmann::json;

// A record's field of the type the trainer writes, within [low, high]; nullopt for anything else
// (a rank's records are decoded, never trusted: fuzz_control_record).
std::optional<std::int64_t> integer_field(const json& record, const char* key, std::int64_t low, std::int64_t high) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number_integer() ||
      (found->is_number_unsigned() && found->get<std::uint64_t>() > static_cast<std::uint64_t>(high))) {
    return std::nullopt;
  }
  const auto value = found->get<std::int64_t>();
  return value >= low && value <= high ? std::optional(value) : std::nullopt;
}

std::optional<std::string> string_field(const json& record, const char* key) {
  const auto found = record.find(key);
  return found != record.end() && found->is_string() ? std::optional(found->get<std::string>()) : std::nullopt;
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

void Recorder::on_record(int rank, std::string_view payload) {
  const json record = json::parse(payload, nullptr, false);
  if (!record.is_discarded() && record.is_object()) {
    // Anything else is not ours: the protocol lets ranks send other lines. Each typed call ends
    // with after_record(); a record that decoded into none gets it here.
    if (!on_json(rank, record)) {
      after_record();
    }
  }
}

// Every field is read with its type checked: a record of another shape is dropped, never thrown
// out of the supervisor's callback (nlohmann's type_error did, for a string "world_size" or a
// numeric "path") and never handed to the store (a checkpoint record with a bad sha256 failed the
// whole run as a fatal store error): found by fuzz_control_record.
bool Recorder::on_json(int rank, const json& record) {
  const std::string kind = string_field(record, "t").value_or("");
  if (kind == "step") {
    if (const auto step = train::decode_step(record)) {
      on_step(rank, *step);
      return true;
    }
  } else if (kind == "eval" && rank == 0) {
    if (const auto eval = train::decode_eval(record)) {
      on_eval(*eval);
      return true;
    }
  } else if (kind == "remote_steps" && rank == 0) {
    const auto from = integer_field(record, "rank", 1, std::numeric_limits<int>::max());
    const auto rows = record.find("rows");
    if (!from || rows == record.end() || !rows->is_array()) {
      return false;
    }
    std::vector<train::StepMetrics> steps;
    for (const auto& row : *rows) {
      if (const auto step = train::decode_row(row)) {
        steps.push_back(*step);
      }
    }
    on_remote_steps(static_cast<int>(*from), steps);
    return true;
  } else if (kind == "checkpoint") {
    const auto path = string_field(record, "path");
    const auto sha256 = string_field(record, "sha256");
    const auto size_bytes = integer_field(record, "size_bytes", 0, std::numeric_limits<std::int64_t>::max());
    if (!path || path->empty() || !sha256 || !is_sha256_hex(*sha256) || !size_bytes) {
      return false;  // not a checkpoint record the trainer writes (the store would refuse it, failing the run)
    }
    train::CheckpointFile file;
    file.path = *path;
    file.sha256 = *sha256;
    file.size_bytes = *size_bytes;
    on_checkpoint(file);
    return true;
  } else if (kind == "collectives" && rank == 0) {
    if (auto allreduce = string_field(record, "allreduce")) {
      on_collectives(*allreduce);
      return true;
    }
  } else if (kind == "skipped_images") {
    if (const auto files = record.find("files"); files != record.end() && files->is_array()) {
      std::vector<std::string> names;
      for (const auto& file : *files) {
        if (file.is_string()) {
          names.push_back(file.get<std::string>());
        }
      }
      on_skipped_images(names);
      return true;
    }
  } else if (kind == "start" && rank == 0) {
    on_start(
        {.world_size =
             static_cast<int>(integer_field(record, "world_size", 1, std::numeric_limits<int>::max()).value_or(1)),
         .total_steps = integer_field(record, "total_steps", 0, std::numeric_limits<std::int64_t>::max()).value_or(0)});
    return true;
  }
  return false;
}

}  // namespace expctl::run
