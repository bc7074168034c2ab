#include "expctl/report/chart.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/report/format.hpp"
#include "expctl/report/report.hpp"

namespace expctl::report::chart {

namespace {

constexpr std::string_view k_style = R"(body{font-family:sans-serif;margin:2em;color:#222}
h1{font-size:1.4em}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}svg{max-width:760px;border:1px solid #ddd;background:#fff}
)";

std::string axis_end(const Scale& scale, double end) {
  return detail::number(scale.log ? std::pow(10, end) : end);
}

}  // namespace

double Scale::at(double value, double out_low, double out_high) const {
  const double v = log ? std::log10(value) : value;
  return out_low + (v - range.low) / (range.high - range.low) * (out_high - out_low);
}

Scale scale_of(std::initializer_list<std::span<const double>> parts, bool allow_log) {
  double low = INFINITY;
  double high = -INFINITY;
  for (const auto& values : parts) {
    for (const double value : values) {
      if (std::isfinite(value)) {
        low = std::min(low, value);
        high = std::max(high, value);
      }
    }
  }
  if (!std::isfinite(low)) {
    return {};
  }
  Scale scale;
  scale.log = allow_log && low > 0 && high / low >= 20;
  scale.range = scale.log ? Range{std::log10(low), std::log10(high)} : Range{low, high};
  if (scale.range.high <= scale.range.low) {
    const double pad = scale.range.low == 0 ? 1 : std::abs(scale.range.low) * 0.05;
    scale.range = {scale.range.low - pad, scale.range.high + pad};
  }
  return scale;
}

std::string svg_open(std::string_view id, std::string_view title) {
  return fmt::format(
      R"(<svg id="{}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" role="img"><title>{}</title>)", id,
      k_width, k_height, xml_escape(title));
}

std::string axes(const Scale& x, const Scale& y, std::string_view x_label, std::string_view y_label) {
  const double base = k_height - k_bottom;
  std::string svg = fmt::format(
      R"(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#444"/><line x1="{0}" y1="{3}" x2="{0}" y2="{1}" stroke="#444"/>)",
      k_left, base, k_width - k_right, k_top);
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="start">{}</text>)", k_left, base + 14,
                     axis_end(x, x.range.low));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_width - k_right, base + 14,
                     axis_end(x, x.range.high));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}{}</text>)", (k_left + k_width) / 2,
                     k_height - 6, xml_escape(x_label), x.log ? " (log scale)" : "");
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_left - 4, base,
                     axis_end(y, y.range.low));
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{}</text>)", k_left - 4, k_top + 10,
                     axis_end(y, y.range.high));
  svg += fmt::format(
      R"~(<text x="14" y="{0}" font-size="12" transform="rotate(-90 14 {0})" text-anchor="middle">{1}</text>)~",
      (k_top + base) / 2, xml_escape(y_label));
  return svg;
}

std::string page_open(std::string_view title, std::string_view extra_style) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{}</title>\n<style>{}{}</style>"
      "</head>\n<body>\n",
      xml_escape(title), k_style, extra_style);
}

std::string page_close() {
  return "</body></html>\n";
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  const TableOptions& options) {
  std::string html = options.id.empty() ? "<table><tr>" : fmt::format("<table id=\"{}\"><tr>", options.id);
  for (const auto& cell : header) {
    html += "<th>" + xml_escape(cell) + "</th>";
  }
  html += "</tr>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    html += i < options.row_classes.size() ? "<tr class=\"" + options.row_classes[i] + "\">" : std::string("<tr>");
    for (size_t column = 0; column < rows[i].size(); ++column) {
      html += (column >= options.numeric_from ? "<td class=\"num\">" : "<td>") + xml_escape(rows[i][column]) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string list(std::string_view id, const std::vector<std::string>& items) {
  std::string html = fmt::format("<ul id=\"{}\">\n", id);
  for (const auto& item : items) {
    html += "<li>" + xml_escape(item) + "</li>\n";
  }
  return html + "</ul>\n";
}

}  // namespace expctl::report::chart
