// The HTML rendering of a sweep report: the table, the notes, and one SVG plot per metric and
// numeric axis (each configuration's runs as small dots, its median as a large one with a bar of
// ± the spread). The page, table, scales and axes are report::chart's, shared with the compare
// report (report/html.cpp).

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/report/chart.hpp"
#include "expctl/report/report.hpp"
#include "expctl/sweep/report.hpp"
#include "expctl/sweep/report_parts.hpp"

namespace expctl::sweep {

namespace {

namespace chart = report::chart;
using report::xml_escape;

constexpr std::string_view k_color = chart::k_blue;

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

std::string marks(const Configuration& configuration, size_t metric, size_t axis, const chart::Scale& x,
                  const chart::Scale& y) {
  const Cell& cell = configuration.cells[metric];
  const double px = x.x(configuration.axes[axis].get<double>());
  std::string svg;
  for (const double value : cell.values) {
    if (std::isfinite(value)) {
      svg += fmt::format(R"(<circle class="run" cx="{:.2f}" cy="{:.2f}" r="2" fill="{}" fill-opacity="0.4"/>)", px,
                         y.y(value), k_color);
    }
  }
  if (std::isfinite(cell.spread)) {
    svg += fmt::format(R"(<line class="spread" x1="{0:.2f}" y1="{1:.2f}" x2="{0:.2f}" y2="{2:.2f}" stroke="{3}"/>)", px,
                       y.y(cell.median - cell.spread), y.y(cell.median + cell.spread), k_color);
  }
  if (std::isfinite(cell.median)) {
    svg += fmt::format(R"(<circle class="median" cx="{:.2f}" cy="{:.2f}" r="4" fill="{}"/>)", px, y.y(cell.median),
                       k_color);
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
  const chart::Scale x = chart::scale_of({xs}, /*allow_log=*/true);
  const chart::Scale y = chart::scale_of({ys});
  const std::string& name = report.metrics[metric];
  std::string svg = chart::svg_open(plot_id(name, report.axes[axis]), name + " against " + report.axes[axis]);
  svg += chart::axes(x, y, report.axes[axis], name);
  for (const Configuration& configuration : report.configurations) {
    svg += marks(configuration, metric, axis, x, y);
  }
  return svg + "</svg>\n";
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
  std::string html = chart::page_open("expctl sweep: " + heading, "");
  html += "<h1>" + xml_escape(heading) + "</h1>\n";
  // The axes' and the points' columns are text; the metrics' columns from there on are numbers.
  html += chart::table(detail::report_header(report), detail::report_rows(report),
                       {.id = "configurations", .numeric_from = report.axes.size() + 1});
  html += chart::list("notes", detail::report_notes(report));
  html += "<h2>Metrics against the axes</h2>\n" + plots(report);
  return html + chart::page_close();
}

}  // namespace expctl::sweep
