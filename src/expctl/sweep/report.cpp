#include "expctl/sweep/report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "expctl/compare/statistics.hpp"
#include "expctl/spec/canonical.hpp"
#include "expctl/sweep/report_parts.hpp"
#include "expctl/util/markdown.hpp"
#include "expctl/util/strings.hpp"
#include "expctl/util/text_table.hpp"

namespace expctl::sweep {

namespace {

using nlohmann::json;
constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// A summary value: numbers, and the record's spellings of non-finite numbers ("nan", "inf").
std::optional<double> number_of(const json& value) {
  if (value.is_number()) {
    return value.get<double>();
  }
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "nan") {
      return k_nan;
    }
    if (text == "inf" || text == "-inf") {
      return text == "inf" ? INFINITY : -INFINITY;
    }
  }
  return std::nullopt;
}

json summary_of(const store::RunRecord& run) {
  return json::parse(run.summary_json, nullptr, /*allow_exceptions=*/false);
}

std::optional<double> metric_of(const json& summary, const std::string& metric) {
  return summary.is_object() && summary.contains(metric) ? number_of(summary.at(metric)) : std::nullopt;
}

Cell make_cell(std::vector<double> values) {
  Cell cell{std::move(values), k_nan, k_nan};
  std::vector<double> finite;
  std::copy_if(cell.values.begin(), cell.values.end(), std::back_inserter(finite), [](double v) { return std::isfinite(v); });
  if (!finite.empty()) {
    cell.median = compare::median(finite);
  }
  const std::vector<std::vector<double>> groups{finite};
  if (const auto spread = compare::pooled_huber_scale(groups)) {
    cell.spread = *spread;
  }
  return cell;
}

std::vector<Cell> cells_of(std::span<const store::RunRecord* const> runs, const std::vector<std::string>& metrics) {
  std::vector<Cell> cells;
  for (const std::string& metric : metrics) {
    std::vector<double> values;
    for (const store::RunRecord* run : runs) {
      if (const auto value = metric_of(summary_of(*run), metric)) {
        values.push_back(*value);
      }
    }
    cells.push_back(make_cell(std::move(values)));
  }
  return cells;
}

std::vector<std::string> present_defaults(std::span<const std::vector<store::RunRecord>> runs) {
  std::vector<std::string> metrics;
  for (const std::string_view metric : k_default_metrics) {
    const bool present = std::any_of(runs.begin(), runs.end(), [&](const auto& point_runs) {
      return std::any_of(point_runs.begin(), point_runs.end(),
                         [&](const auto& run) { return metric_of(summary_of(run), std::string(metric)).has_value(); });
    });
    if (present) {
      metrics.emplace_back(metric);
    }
  }
  return metrics;
}

// The key of a point's configuration: its non-replicate axis values.
std::vector<json> configuration_axes(const Sweep& sweep, const Point& point) {
  std::vector<json> axes;
  for (size_t i = 0; i < point.axes.size(); ++i) {
    if (!sweep.replicate_axis[i]) {
      axes.push_back(point.axes[i].value);
    }
  }
  return axes;
}

std::string key_of(const std::vector<json>& axes) {
  return spec::canonical_json(json(axes));
}

void add_configurations(const Sweep& sweep, std::span<const std::vector<store::RunRecord>> runs, Report& report) {
  std::map<std::string, size_t> index_of;
  std::vector<std::vector<const store::RunRecord*>> members;
  for (const Point& point : sweep.points) {
    const auto axes = configuration_axes(sweep, point);
    auto [found, inserted] = index_of.emplace(key_of(axes), report.configurations.size());
    if (inserted) {
      report.configurations.push_back({axes, {}, {}, {}});
      members.emplace_back();
    }
    Configuration& configuration = report.configurations[found->second];
    configuration.points.push_back(point.index);
    for (const store::RunRecord& run : runs[point.index]) {
      configuration.runs.push_back(run.id);
      members[found->second].push_back(&run);
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    report.configurations[i].cells = cells_of(members[i], report.metrics);
  }
}

void add_points(const Sweep& sweep, std::span<const std::vector<store::RunRecord>> runs, Report& report) {
  for (const Point& point : sweep.points) {
    PointResult result{point.index, point.spec.hash(), {}, {}};
    std::vector<const store::RunRecord*> members;
    for (const store::RunRecord& run : runs[point.index]) {
      result.runs.push_back(run.id);
      members.push_back(&run);
    }
    result.cells = cells_of(members, report.metrics);
    report.points.push_back(std::move(result));
  }
}

void add_best(Report& report) {
  for (size_t m = 0; m < report.metrics.size(); ++m) {
    const auto direction = metric_direction(report.metrics[m]);
    std::optional<size_t> best;
    for (size_t c = 0; c < report.configurations.size() && direction; ++c) {
      const double value = report.configurations[c].cells[m].median;
      if (!std::isfinite(value)) {
        continue;
      }
      const double current = best ? report.configurations[*best].cells[m].median : 0;
      const bool better = *direction == compare::Direction::higher_is_better ? value > current : value < current;
      if (!best || better) {
        best = c;
      }
    }
    if (best) {
      report.best.push_back({report.metrics[m], m, *direction, *best});
    }
  }
}

// Four significant digits, but no exponent for large values: 21770, not 2.177e+04.
std::string number_text(double value) {
  if (!std::isfinite(value)) {
    return std::isnan(value) ? "-" : fmt::format("{}", value);
  }
  return std::abs(value) >= 1000 ? fmt::format("{:.0f}", value) : fmt::format("{:.4g}", value);
}

std::string cell_text(const Cell& cell) {
  if (cell.values.empty()) {
    return "-";
  }
  return std::isfinite(cell.spread) ? number_text(cell.median) + " ± " + number_text(cell.spread)
                                    : number_text(cell.median);
}

std::string axes_text(const Report& report, const Configuration& configuration) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < report.axes.size(); ++i) {
    parts.push_back(report.axes[i] + "=" + value_text(configuration.axes[i]));
  }
  return parts.empty() ? "(base)" : util::join(parts, " ");
}

std::vector<std::string> table_header(const Report& report) {
  std::vector<std::string> header = report.axes;
  header.emplace_back("points");
  header.emplace_back("runs");
  header.insert(header.end(), report.metrics.begin(), report.metrics.end());
  return header;
}

std::vector<std::vector<std::string>> table_rows(const Report& report) {
  std::vector<std::vector<std::string>> rows;
  for (const Configuration& configuration : report.configurations) {
    std::vector<std::string> row;
    for (const json& value : configuration.axes) {
      row.push_back(value_text(value));
    }
    std::vector<std::string> points;
    for (const size_t point : configuration.points) {
      points.push_back(std::to_string(point));
    }
    row.push_back(util::join(points, ","));
    row.push_back(std::to_string(configuration.runs.size()));
    for (const Cell& cell : configuration.cells) {
      row.push_back(cell_text(cell));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

size_t runs_found(const Report& report) {
  size_t runs = 0;
  for (const PointResult& point : report.points) {
    runs += point.runs.size();
  }
  return runs;
}

std::vector<std::string> missing_points(const Report& report) {
  std::vector<std::string> missing;
  for (const PointResult& point : report.points) {
    const bool in_array = std::any_of(report.array.begin(), report.array.end(),
                                      [&](const ArrayPoint& held) { return held.point == point.index; });
    if (point.runs.empty() && !in_array) {
      missing.push_back(std::to_string(point.index));
    }
  }
  return missing;
}

std::string heading(const Report& report) {
  return fmt::format("sweep {} ({} points, {} of {} runs completed, sweep hash {})", report.name, report.points.size(),
                     runs_found(report), report.runs_expected, report.hash.substr(0, 12));
}

std::vector<std::string> notes(const Report& report) {
  std::vector<std::string> lines;
  if (report.replicates) {
    lines.emplace_back(
        "cells: median ± run-to-run spread (robust Huber scale over the configuration's runs, two or more)");
  }
  for (const Best& best : report.best) {
    const Configuration& configuration = report.configurations[best.configuration];
    lines.push_back(fmt::format("best {} ({} is better): {} ({})", best.metric, compare::to_string(best.direction),
                                axes_text(report, configuration),
                                number_text(configuration.cells[best.metric_index].median)));
  }
  for (const std::string& line : array_lines(report.array)) {
    lines.push_back(line);
  }
  if (const auto missing = missing_points(report); !missing.empty()) {
    lines.push_back("no completed run yet: point(s) " + util::join(missing, ", ") + " (expctl sweep FILE runs them)");
  }
  return lines;
}

json cell_json(const Cell& cell) {
  const auto number = [](double value) { return std::isfinite(value) ? json(value) : json(nullptr); };
  json values = json::array();
  for (const double value : cell.values) {
    values.push_back(number(value));
  }
  return {{"median", number(cell.median)}, {"spread", number(cell.spread)}, {"n", cell.values.size()},
          {"values", values}};
}

json metrics_json(const Report& report, const std::vector<Cell>& cells) {
  json out = json::object();
  for (size_t m = 0; m < report.metrics.size(); ++m) {
    out[report.metrics[m]] = cell_json(cells[m]);
  }
  return out;
}

json axes_json(const Report& report, const std::vector<json>& values) {
  json out = json::object();
  for (size_t i = 0; i < report.axes.size(); ++i) {
    out[report.axes[i]] = values[i];
  }
  return out;
}

}  // namespace

std::optional<compare::Direction> metric_direction(std::string_view metric) {
  if (const compare::MetricInfo* info = compare::find_metric(metric)) {
    return info->direction;
  }
  const auto has = [&](std::string_view word) { return metric.find(word) != std::string_view::npos; };
  if (has("loss") || has("time") || has("error")) {
    return compare::Direction::lower_is_better;
  }
  if (has("accuracy") || has("per_sec") || has("throughput")) {
    return compare::Direction::higher_is_better;
  }
  return std::nullopt;
}

Report build_report(const Sweep& sweep, std::span<const std::vector<store::RunRecord>> runs,
                    std::vector<std::string> metrics) {
  EXPCTL_ASSERT(runs.size() == sweep.points.size(), "{} run lists for {} points", runs.size(), sweep.points.size());
  Report report;
  report.name = sweep.name;
  report.hash = sweep.hash;
  report.file = sweep.file.string();
  for (size_t i = 0; i < sweep.axis_paths.size(); ++i) {
    if (!sweep.replicate_axis[i]) {
      report.axes.push_back(sweep.axis_paths[i]);
    }
    report.replicates = report.replicates || sweep.replicate_axis[i];
  }
  report.replicates = report.replicates || sweep.repeat > 1;
  report.metrics = metrics.empty() ? present_defaults(runs) : std::move(metrics);
  report.runs_expected = sweep.total_runs();
  add_configurations(sweep, runs, report);
  add_points(sweep, runs, report);
  add_best(report);
  return report;
}

std::vector<std::vector<store::RunRecord>> completed_runs(const Sweep& sweep, const store::Store& store) {
  std::vector<std::vector<store::RunRecord>> runs;
  for (const Point& point : sweep.points) {
    runs.push_back(store.list_runs({.status = store::RunStatus::completed, .spec_hash_prefix = point.spec.hash()}));
  }
  return runs;
}

std::string render(const Report& report, std::string_view format) {
  if (format == "json") {
    return to_json(report).dump(2) + "\n";
  }
  if (format == "markdown") {
    return render_markdown(report);
  }
  return format == "html" ? render_html(report) : render_text(report);
}

std::string report_of(const Sweep& sweep, const store::Store& store, const std::vector<std::string>& metrics,
                      const std::string& format) {
  return render(build_report(sweep, completed_runs(sweep, store), metrics), format);
}

std::string render_text(const Report& report) {
  util::TextTable table(table_header(report));
  for (size_t column = report.axes.size() + 1; column < table_header(report).size(); ++column) {
    table.set_align(column, util::TextTable::Align::right);
  }
  for (auto& row : table_rows(report)) {
    table.add_row(std::move(row));
  }
  std::string text = heading(report) + "\n\n" + table.render() + "\n";
  for (const std::string& note : notes(report)) {
    text += note + "\n";
  }
  return text;
}

std::string render_markdown(const Report& report) {
  // Axis values and names come from the sweep file: text, never markup.
  const auto header = table_header(report);
  std::string text = "### " + util::md_text(heading(report)) + "\n\n" + util::md_row(util::md_cells(header)) + "|";
  for (size_t i = 0; i < header.size(); ++i) {
    text += i <= report.axes.size() ? " --- |" : " ---: |";
  }
  text += "\n";
  for (const auto& row : table_rows(report)) {
    text += util::md_row(util::md_cells(row));
  }
  text += "\n";
  for (const std::string& note : notes(report)) {
    text += "- " + util::md_text(note) + "\n";
  }
  return text;
}

json to_json(const Report& report) {
  json configurations = json::array();
  for (const Configuration& configuration : report.configurations) {
    configurations.push_back({{"axes", axes_json(report, configuration.axes)},
                              {"points", configuration.points},
                              {"runs", configuration.runs},
                              {"metrics", metrics_json(report, configuration.cells)}});
  }
  json points = json::array();
  for (const PointResult& point : report.points) {
    points.push_back({{"index", point.index}, {"hash", point.hash}, {"runs", point.runs},
                      {"metrics", metrics_json(report, point.cells)}});
  }
  json best = json::object();
  for (const Best& entry : report.best) {
    best[entry.metric] = {{"configuration", entry.configuration}, {"direction", compare::to_string(entry.direction)},
                          {"axes", axes_json(report, report.configurations[entry.configuration].axes)}};
  }
  return {{"format_version", k_report_json_version},
          {"kind", "sweep-report"},
          {"sweep", {{"name", report.name}, {"hash", report.hash}, {"file", report.file}}},
          {"axes", report.axes},
          {"metrics", report.metrics},
          {"runs_expected", report.runs_expected},
          {"runs_completed", runs_found(report)},
          {"configurations", configurations},
          {"points", points},
          {"best", best},
          {"array", array_json(report.array)}};
}

namespace detail {

std::string report_heading(const Report& report) {
  return heading(report);
}
std::vector<std::string> report_notes(const Report& report) {
  return notes(report);
}
std::vector<std::string> report_header(const Report& report) {
  return table_header(report);
}
std::vector<std::vector<std::string>> report_rows(const Report& report) {
  return table_rows(report);
}
}  // namespace detail

}  // namespace expctl::sweep
