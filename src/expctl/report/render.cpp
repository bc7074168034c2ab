#include <cmath>

#include <fmt/format.h>

#include "expctl/report/format.hpp"
#include "expctl/report/report.hpp"
#include "expctl/util/markdown.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::report {

using nlohmann::json;

namespace {

constexpr std::string_view k_red = "\x1b[1;31m";
constexpr std::string_view k_green = "\x1b[1;32m";
constexpr std::string_view k_yellow = "\x1b[1;33m";
constexpr std::string_view k_bold = "\x1b[1m";
constexpr std::string_view k_reset = "\x1b[0m";

std::string paint(std::string_view text, std::string_view color, const TextOptions& options) {
  return options.color ? fmt::format("{}{}{}", color, text, k_reset) : std::string(text);
}

std::string_view outcome_color(compare::Outcome outcome) {
  switch (outcome) {
    case compare::Outcome::no_regression:
      return k_green;
    case compare::Outcome::regression:
      return k_red;
    case compare::Outcome::not_comparable:
    case compare::Outcome::inconclusive:
      return k_yellow;
  }
  return k_bold;
}

std::string side_line(std::string_view label, const compare::SideInfo& side) {
  return fmt::format("{}: {} ({}, spec {}, started {})\n", label, detail::ids_text(side), side.name,
                     side.spec_hash.substr(0, 12), side.started_at);
}

std::string text_spec_section(const compare::Comparison& comparison) {
  if (comparison.spec_changes.empty()) {
    return "  no differences\n";
  }
  util::TextTable table({"key", "A", "B", "hashed"});
  for (const auto& change : comparison.spec_changes) {
    table.add_row({change.path, detail::value_text(change.old_value), detail::value_text(change.new_value),
                   change.hashed ? "yes" : "no"});
  }
  return table.render();
}

std::string text_env_section(const compare::Comparison& comparison) {
  if (!comparison.env_available) {
    return "  not available (a run has no stored fingerprint)\n";
  }
  if (comparison.env_changes.empty()) {
    return "  no differences\n";
  }
  util::TextTable table({"group", "field", "A", "B", "hashed"});
  for (const auto& row : comparison.env_changes) {
    table.add_row({row.group, row.field, row.left, row.right, row.hashed ? "yes" : "no"});
  }
  return table.render();
}

std::string text_metrics_section(const compare::Comparison& comparison) {
  if (comparison.metrics.empty()) {
    return "  no metrics on either side\n";
  }
  util::TextTable table(detail::metric_header());
  for (size_t column = 1; column <= 4; ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (const auto& row : comparison.metrics) {
    table.add_row(detail::metric_cells(row));
  }
  std::string text = table.render();
  for (const auto& note : detail::verdict_notes(comparison)) {
    text += "  " + note + "\n";
  }
  return text;
}

std::string text_runs_section(const compare::Comparison& comparison) {
  util::TextTable table(detail::run_header(comparison));
  for (auto& cells : detail::run_rows(comparison)) {
    table.add_row(std::move(cells));
  }
  return table.render() + "  history: " + detail::history_text(comparison) + "\n";
}

json number_json(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json optional_json(const std::optional<double>& value) {
  return value ? number_json(*value) : json(nullptr);
}

json run_evidence_json(const compare::RunLevelEvidence& evidence) {
  return {{"test", "run-level"},
          {"scale", evidence.scale == compare::Scale::relative ? "relative" : "absolute"},
          {"runs_a", evidence.runs_a},
          {"runs_b", evidence.runs_b},
          {"history_runs", evidence.history_runs},
          {"change", number_json(evidence.change)},
          {"noise", number_json(evidence.noise_fraction)},
          {"noise_df", number_json(evidence.noise.df)},
          {"noise_runs", evidence.noise.runs},
          {"standard_error", number_json(evidence.standard_error)},
          {"band", number_json(evidence.band)},
          {"mde", number_json(evidence.mde)},
          {"p_value", number_json(evidence.p_value)},
          {"adjusted_p", number_json(evidence.adjusted_p)},
          {"level", number_json(evidence.level)},
          {"alpha", evidence.alpha},
          {"family", evidence.family},
          {"change_low", number_json(evidence.ci_low)},
          {"change_high", number_json(evidence.ci_high)},
          {"suggested_repeat", evidence.suggested_repeat == 0 ? json(nullptr) : json(evidence.suggested_repeat)}};
}

json reproducibility_json(const compare::Reproducibility& result) {
  const auto optional = [](const auto& value) { return value ? json(*value) : json(nullptr); };
  return {{"required", result.required},
          {"identical", result.identical},
          {"run", result.run_id.empty() ? json(nullptr) : json(result.run_id)},
          {"step", optional(result.step)},
          {"rank", optional(result.rank)},
          {"metrics", result.metrics},
          {"reason", result.reason}};
}

json runs_json(const compare::Comparison& comparison) {
  json runs = json::array();
  for (const auto& run : comparison.runs) {
    json values = json::object();
    for (const auto& [name, value] : run.values) values[name] = number_json(value);
    runs.push_back({{"side", run.side},
                    {"run", run.run_id},
                    {"values", values},
                    {"steps", run.steps},
                    {"throughput_p5", run.steps == 0 ? json(nullptr) : number_json(run.p5)},
                    {"throughput_p50", run.steps == 0 ? json(nullptr) : number_json(run.p50)},
                    {"throughput_p95", run.steps == 0 ? json(nullptr) : number_json(run.p95)}});
  }
  return runs;
}

json metric_json(const compare::MetricRow& row) {
  const auto& verdict = row.verdict;
  json item = {{"metric", verdict.metric},
               {"a", number_json(verdict.a)},
               {"b", number_json(verdict.b)},
               {"absolute_delta", number_json(verdict.absolute_delta)},
               {"relative_delta", optional_json(verdict.relative_delta)},
               {"better", compare::to_string(row.direction)},
               {"threshold", row.threshold.to_string()},
               {"threshold_origin", row.threshold_origin},
               {"threshold_crossed", verdict.threshold_crossed},
               {"unit", row.unit},
               {"source", compare::to_string(row.source)},
               {"n_a", row.n_a},
               {"n_b", row.n_b},
               {"runs_a", row.runs_a},
               {"runs_b", row.runs_b},
               {"paired", row.paired},
               {"one_trajectory", row.one_trajectory},
               {"change", row.change},
               {"history_runs", row.history_runs},
               {"exact", row.exact},
               {"status", compare::to_string(verdict.status)},
               {"reason", verdict.reason},
               {"evidence", nullptr}};
  if (verdict.run_evidence) {
    item["evidence"] = run_evidence_json(*verdict.run_evidence);
  }
  if (verdict.evidence) {
    const auto& evidence = *verdict.evidence;
    json ratio = nullptr;
    if (evidence.ratio) {
      ratio = {{"estimate", number_json(evidence.ratio->estimate)},
               {"low", number_json(evidence.ratio->low)},
               {"high", number_json(evidence.ratio->high)},
               {"confidence", evidence.ratio->confidence}};
    }
    item["evidence"] = {{"test", compare::to_string(evidence.decided_by)},
                        {"p_value", evidence.p_value},
                        {"adjusted_p", evidence.adjusted_p},
                        {"level", evidence.level},
                        {"alpha", evidence.alpha},
                        {"family", evidence.family},
                        {"mann_whitney_p", evidence.paired ? json(nullptr) : json(evidence.test.p_value)},
                        {"rank_biserial", evidence.paired ? json(nullptr) : json(evidence.test.rank_biserial)},
                        {"ratio", ratio}};
    if (evidence.paired) {
      item["evidence"]["pairs"] = evidence.paired->pairs;
      item["evidence"]["change"] = number_json(evidence.change);
      item["evidence"]["change_low"] = number_json(evidence.change_low);
      item["evidence"]["change_high"] = number_json(evidence.change_high);
      item["evidence"]["t"] = number_json(evidence.paired->t);
      item["evidence"]["df"] = evidence.paired->df;
    }
  }
  return item;
}

json side_json(const compare::SideInfo& side) {
  return {{"runs", side.run_ids}, {"name", side.name}, {"spec_hash", side.spec_hash}, {"started_at", side.started_at}};
}

json curve_json(const compare::CurveReport& curve) {
  const auto step = [](const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); };
  return {{"available", curve.available},
          {"identical", curve.curves.identical},
          {"sha256_equal", curve.sha_equal},
          {"length_a", curve.curves.length_a},
          {"length_b", curve.curves.length_b},
          {"first_divergence_step", step(curve.first_divergence_step)},
          {"max_abs_difference", number_json(curve.curves.max_abs_difference)},
          {"max_difference_step", step(curve.max_difference_step)}};
}

using util::md_cells;
using util::md_row;

// `rows`: cells already Markdown (md_cells).
std::string md_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string text = md_row(md_cells(header)) + "|";
  for (size_t i = 0; i < header.size(); ++i) {
    text += " --- |";
  }
  text += "\n";
  for (const auto& row : rows) {
    text += md_row(row);
  }
  return text;
}

// Each row of `rows` through md_cells.
std::vector<std::vector<std::string>> md_rows(const std::vector<std::vector<std::string>>& rows,
                                              const std::vector<std::size_t>& code_columns = {}) {
  std::vector<std::vector<std::string>> out;
  for (const auto& row : rows) {
    out.push_back(md_cells(row, code_columns));
  }
  return out;
}

std::string_view md_icon(compare::Outcome outcome) {
  switch (outcome) {
    case compare::Outcome::no_regression:
      return ":white_check_mark:";
    case compare::Outcome::regression:
      return ":x:";
    case compare::Outcome::not_comparable:
      return ":warning:";
    case compare::Outcome::inconclusive:
      return ":grey_question:";
  }
  return "";
}


}  // namespace

std::optional<Format> parse_format(std::string_view name) {
  constexpr Format formats[] = {Format::text, Format::json, Format::markdown, Format::html};
  for (size_t i = 0; i < std::size(formats); ++i) {
    if (k_format_names[i] == name) {
      return formats[i];
    }
  }
  return std::nullopt;
}

std::string render_text(const compare::Comparison& comparison, const TextOptions& options) {
  // Stored strings (run names, spec values, notes) reach every part: each is made terminal_safe
  // before the colours, which are the only escape sequences this text may hold.
  const auto safe = [](const std::string& part) { return util::terminal_safe(part); };
  std::string text = paint(safe(comparison.verdict_line()), outcome_color(comparison.outcome), options) + "\n";
  for (const auto& line : detail::change_lines(comparison)) {
    text += "  " + safe(line) + "\n";
  }
  text += "\n" + safe(side_line("A", comparison.a) + side_line("B", comparison.b));
  const auto heading = [&](const std::string& title) { return "\n" + paint(safe(title), k_bold, options) + "\n"; };
  text += heading(comparison.ignored.empty()
                      ? "Spec differences"
                      : fmt::format("Spec differences (ignoring {})", fmt::join(comparison.ignored, ", ")));
  text += safe(text_spec_section(comparison));
  text += heading("Environment differences") + safe(text_env_section(comparison));
  text += heading("Metrics") + safe(text_metrics_section(comparison));
  text += heading("Runs") + safe(text_runs_section(comparison));
  text += heading("Loss curves") + "  " + safe(detail::curve_text(comparison.curve)) + "\n";
  if (comparison.reproducibility.required) {
    text += "  reproducibility: " + safe(comparison.reproducibility.reason) + "\n";
  }
  return text;
}

json to_json(const compare::Comparison& comparison) {
  json spec = json::array();
  for (const auto& change : comparison.spec_changes) {
    spec.push_back(
        {{"path", change.path}, {"a", change.old_value}, {"b", change.new_value}, {"hashed", change.hashed}});
  }
  json metrics = json::array();
  for (const auto& row : comparison.metrics) {
    metrics.push_back(metric_json(row));
  }
  return {{"format_version", k_json_version},
          {"kind", "compare"},
          {"verdict", comparison.verdict_line()},
          {"outcome", compare::to_string(comparison.outcome)},
          {"exit_code", compare::exit_code(comparison.outcome)},
          {"inconclusive", comparison.inconclusive},
          {"reproducibility", reproducibility_json(comparison.reproducibility)},
          {"history", comparison.history},
          {"runs", runs_json(comparison)},
          {"a", side_json(comparison.a)},
          {"b", side_json(comparison.b)},
          {"not_comparable", comparison.not_comparable},
          {"regressions", comparison.regressions},
          {"ignored", comparison.ignored},
          {"spec_changes", spec},
          {"environment",
           {{"available", comparison.env_available},
            {"changes", comparison.env_available ? env::diff_rows_json(comparison.env_changes) : json::array()}}},
          {"metrics", metrics},
          {"loss_curve", curve_json(comparison.curve)},
          {"phases", {{"a", compare::phases_json(comparison.phases_a)}, {"b", compare::phases_json(comparison.phases_b)}}}};
}

std::string render_markdown(const compare::Comparison& comparison) {
  using util::md_code;
  using util::md_text;
  std::string text = fmt::format("### {} {}\n\n", md_icon(comparison.outcome), md_text(comparison.verdict_line()));
  for (const auto& line : detail::change_lines(comparison)) {
    text += "- " + md_text(line) + "\n";
  }
  text += detail::change_lines(comparison).empty() ? "" : "\n";
  text += fmt::format("**A** {} ({}) · **B** {} ({})\n", md_code(detail::ids_text(comparison.a)),
                      md_text(comparison.a.name), md_code(detail::ids_text(comparison.b)), md_text(comparison.b.name));
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : comparison.metrics) {
    auto cells = md_cells(detail::metric_cells(row));
    if (row.verdict.status == compare::Status::regression) {
      cells[7] = "**" + cells[7] + "**";
    }
    rows.push_back(std::move(cells));
  }
  text += "\n#### Metrics\n\n" +
          (rows.empty() ? std::string("No metrics on either side.\n") : md_table(detail::metric_header(), rows));
  for (const auto& note : detail::verdict_notes(comparison)) {
    text += "\n- " + md_text(note);
  }
  text += detail::verdict_notes(comparison).empty() ? "" : "\n";
  text += "\n#### Runs\n\n" + md_table(detail::run_header(comparison), md_rows(detail::run_rows(comparison))) +
          "\nHistory: " + md_text(detail::history_text(comparison)) + "\n";
  text += "\n#### Loss curves\n\n" + md_text(detail::curve_text(comparison.curve)) + "\n";
  if (comparison.reproducibility.required) {
    text += "\nReproducibility: " + md_text(comparison.reproducibility.reason) + "\n";
  }
  rows.clear();
  for (const auto& change : comparison.spec_changes) {
    rows.push_back({change.path, detail::value_text(change.old_value), detail::value_text(change.new_value),
                    change.hashed ? "yes" : "no"});
  }
  text += "\n#### Spec differences\n\n" +
          (rows.empty() ? std::string("No differences.\n") : md_table({"key", "A", "B", "hashed"}, md_rows(rows, {0})));
  rows.clear();
  for (const auto& row : comparison.env_changes) {
    rows.push_back({row.group, row.field, row.left, row.right, row.hashed ? "yes" : "no"});
  }
  text += "\n#### Environment differences\n\n" +
          (!comparison.env_available ? std::string("Not available (a run has no stored fingerprint).\n")
           : rows.empty()            ? std::string("No differences.\n")
                                     : md_table({"group", "field", "A", "B", "hashed"}, md_rows(rows, {1})));
  return text;
}

std::string render(const compare::Comparison& comparison, Format format, const TextOptions& options) {
  switch (format) {
    case Format::text:
      return render_text(comparison, options);
    case Format::json:
      return to_json(comparison).dump(2) + "\n";
    case Format::markdown:
      return render_markdown(comparison);
    case Format::html:
      return render_html(comparison);
  }
  return render_text(comparison, options);
}

std::string xml_escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          escaped += "?";
        } else {
          escaped += c;
        }
    }
  }
  return escaped;
}

}  // namespace expctl::report
