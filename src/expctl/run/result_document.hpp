#pragma once
/// The document `expctl run --format json` and `expctl resume --format json` print, and the one
/// a sweep reads back from each point's output (sweep_run/runner.cpp): one codec for the writer and
/// the reader, so neither parses the other's printing by hand.
///
///   {"format_version": N, "kind": "run", "run": {"id", "status", ... (api::run_json)}, "summary": {...}}

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace expctl::run {

inline constexpr std::string_view k_result_kind = "run";

/// A point's result as its child process printed it.
struct ResultDocument {
  std::string run_id;      ///< the run recorded (run.id)
  std::string status;      ///< its status as stored ("completed", "failed", ...)
  nlohmann::json run;      ///< the run object as printed
  nlohmann::json summary;  ///< the run's summary (fields in docs/run.md)
};

/// The document: `envelope` ({"format_version", "kind"}) with the run object and its summary.
nlohmann::json encode_result(nlohmann::json envelope, nlohmann::json run, nlohmann::json summary);

/// Reads a document encode_result wrote; nullopt when `text` is not one (a child that died before
/// printing, or printed something else).
std::optional<ResultDocument> decode_result(std::string_view text);

}  // namespace expctl::run
