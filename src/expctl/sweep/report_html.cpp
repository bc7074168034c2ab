// The HTML rendering of a sweep report: the table, the notes, and one SVG plot per metric and
// numeric axis (each configuration's runs as small dots, its median as a large one with a bar of
// ± the spread). Inline CSS and SVG, no scripts, like the compare report (report/html.cpp).

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/report/report.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/sweep/report_parts.hpp"

namespace expctl::sweep {

namespace {

using report::xml_escape;

constexpr double k_width = 640;
constexpr double k_height = 260;
constexpr double k_left = 60;
constexpr double k_right = 20;
constexpr double k_top = 20;
constexpr double k_bottom = 40;
constexpr std::string_view k_color = "#1f77b4";

constexpr std::string_view k_style = R"(body{font-family:sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px}
td.num{text-align:right;font-variant-numeric:tabular-nums}svg{max-width:760px;border:1px solid #ddd;background:#fff}
)";

struct Range {
  double low = 0;
  double high = 1;
};

// One axis of a plot: linear, or log10 when the values are positive and span 20x or more.
struct Scale {
  Range range;
  bool log = false;
  double at(double value, double out_low, double out_high) const {
    const double v = log ? std::log10(value) : value;
    return out_low + (v - range.low) / (range.high - range.low) * (out_high - out_low);
  }
};

Scale scale_of(const std::vector<double>& values, bool allow_log) {
  std::vector<double> finite;
  std::copy_if(values.begin(), values.end(), std::back_inserter(finite), [](double v) { return std::isfinite(v); });
  if (finite.empty()) {
    return {};
  }
  const auto [low, high] = std::minmax_element(finite.begin(), finite.end());
  Scale scale;
  scale.log = allow_log && *low > 0 && *high / *low >= 20;
  scale.range = scale.log ? Range{std::log10(*low), std::log10(*high)} : Range{*low, *high};
  if (scale.range.high <= scale.range.low) {
    const double pad = scale.range.low == 0 ? 1 : std::abs(scale.range.low) * 0.05;
    scale.range = {scale.range.low - pad, scale.range.high + pad};
  }
  return scale;
}

std::string number(double value) {
  return fmt::format("{:.4g}", value);
}

std::string plot_id(const std::string& metric, const std::string& axis) {
  std::string id = "plot-" + metric + "-" + axis;
  std::replace_if(
      id.begin(), id.end(), [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'); }, '-');
  return id;
}

bool numeric_axis(const Report& report, size_t axis) {
  return !report.configurations.empty() &&
         std::all_of(report.configurations.begin(), report.configurations.end(),
                     [&](const Configuration& c) { return c.axes[axis].is_number(); });
}

std::string frame(const Scale& x, const Scale& y, const std::string& x_label, const std::string& y_label) {
  const double base = k_height - k_bottom;
  const auto edge = [](const Scale& s, double v) { return number(s.log ? std::pow(10, v) : v); };
  std::string svg = fmt::format(
      R"(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#444"/><line x1="{0}" y1="{3}" x2="{0}" y2="{1}" stroke="#444"/>)",
      k_left, base, k_width - k_right, k_top);
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11">{}</text>)", k_left, base + 14, edge(x, x.range.low));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_width - k_right, base + 14,
                     edge(x, x.range.high));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}{}</text>)", (k_left + k_width) / 2,
                     k_height - 6, xml_escape(x_label), x.log ? " (log scale)" : "");
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_left - 4, base,
                     edge(y, y.range.low));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_left - 4, k_top + 10,
                     edge(y, y.range.high));
  svg += fmt::format(R"~(<text x="14" y="{0}" font-size="12" transform="rotate(-90 14 {0})" text-anchor="middle">{1}</text>)~",
                     (k_top + base) / 2, xml_escape(y_label));
  return svg;
}

std::string marks(const Configuration& configuration, size_t metric, size_t axis, const Scale& x, const Scale& y) {
  const Cell& cell = configuration.cells[metric];
  const double px = x.at(configuration.axes[axis].get<double>(), k_left, k_width - k_right);
  const auto py = [&](double v) { return y.at(v, k_height - k_bottom, k_top); };
  std::string svg;
  for (const double value : cell.values) {
    if (std::isfinite(value)) {
      svg += fmt::format(R"(<circle class="run" cx="{:.2f}" cy="{:.2f}" r="2" fill="{}" fill-opacity="0.4"/>)", px,
                         py(value), k_color);
    }
  }
  if (std::isfinite(cell.spread)) {
    svg += fmt::format(R"(<line class="spread" x1="{0:.2f}" y1="{1:.2f}" x2="{0:.2f}" y2="{2:.2f}" stroke="{3}"/>)", px,
                       py(cell.median - cell.spread), py(cell.median + cell.spread), k_color);
  }
  if (std::isfinite(cell.median)) {
    svg += fmt::format(R"(<circle class="median" cx="{:.2f}" cy="{:.2f}" r="4" fill="{}"/>)", px, py(cell.median), k_color);
  }
  return svg;
}

std::string plot(const Report& report, size_t metric, size_t axis) {
  std::vector<double> xs;
  std::vector<double> ys;
  for (const Configuration& configuration : report.configurations) {
    const Cell& cell = configuration.cells[metric];
    xs.push_back(configuration.axes[axis].get<double>());
    ys.insert(ys.end(), cell.values.begin(), cell.values.end());
    if (std::isfinite(cell.spread)) {
      ys.insert(ys.end(), {cell.median - cell.spread, cell.median + cell.spread});
    }
  }
  const Scale x = scale_of(xs, true);
  const Scale y = scale_of(ys, false);
  const std::string& name = report.metrics[metric];
  std::string svg = fmt::format(
      R"(<svg id="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img"><title>{}</title>)",
      plot_id(name, report.axes[axis]), k_width, k_height, xml_escape(name + " against " + report.axes[axis]));
  svg += frame(x, y, report.axes[axis], name);
  for (const Configuration& configuration : report.configurations) {
    svg += marks(configuration, metric, axis, x, y);
  }
  return svg + "</svg>\n";
}

std::string table(const Report& report) {
  std::string html = "<table id=\"configurations\"><tr>";
  for (const std::string& cell : detail::report_header(report)) {
    html += "<th>" + xml_escape(cell) + "</th>";
  }
  html += "</tr>\n";
  for (const auto& row : detail::report_rows(report)) {
    html += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      html += (i <= report.axes.size() ? "<td>" : "<td class=\"num\">") + xml_escape(row[i]) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string plots(const Report& report) {
  std::string html;
  for (size_t axis = 0; axis < report.axes.size(); ++axis) {
    if (!numeric_axis(report, axis)) {
      continue;
    }
    for (size_t metric = 0; metric < report.metrics.size(); ++metric) {
      html += "<h3>" + xml_escape(report.metrics[metric] + " against " + report.axes[axis]) + "</h3>\n" +
              plot(report, metric, axis);
    }
  }
  return html.empty() ? "<p>No numeric axis to plot against.</p>\n" : html;
}

}  // namespace

std::string render_html(const Report& report) {
  const std::string heading = detail::report_heading(report);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>expctl sweep: " +
                     xml_escape(heading) + "</title>\n<style>" + std::string(k_style) + "</style></head>\n<body>\n";
  html += "<h1>" + xml_escape(heading) + "</h1>\n" + table(report) + "<ul id=\"notes\">\n";
  for (const std::string& note : detail::report_notes(report)) {
    html += "<li>" + xml_escape(note) + "</li>\n";
  }
  html += "</ul>\n<h2>Metrics against the axes</h2>\n" + plots(report);
  return html + "</body></html>\n";
}

}  // namespace expctl::sweep
