#include "expctl/run/result_document.hpp"

namespace expctl::run {

nlohmann::json encode_result(nlohmann::json envelope, nlohmann::json run, nlohmann::json summary) {
  envelope["run"] = std::move(run);
  envelope["summary"] = std::move(summary);
  return envelope;
}

std::optional<ResultDocument> decode_result(std::string_view text) {
  const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object()) {
    return std::nullopt;
  }
  const auto kind = document.find("kind");
  if (kind == document.end() || !kind->is_string() || kind->get<std::string>() != k_result_kind) {
    return std::nullopt;
  }
  const auto run = document.find("run");
  if (run == document.end() || !run->is_object() || !run->contains("id") || !run->at("id").is_string()) {
    return std::nullopt;
  }
  ResultDocument result;
  result.run_id = run->at("id").get<std::string>();
  if (const auto status = run->find("status"); status != run->end() && status->is_string()) {
    result.status = status->get<std::string>();
  }
  result.run = *run;
  const auto summary = document.find("summary");
  result.summary = summary != document.end() && summary->is_object() ? *summary : nlohmann::json::object();
  return result;
}

}  // namespace expctl::run
