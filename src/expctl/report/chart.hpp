#pragma once
/// The HTML/SVG pieces every report page shares: the page and its style, tables, lists, the plot
/// geometry, scales and axes. Compare's report (report/html.cpp) and the sweep report
/// (sweep/report_html.cpp) draw their plots with them, so the two pages look alike and a fix to
/// an axis reaches both. Inline CSS and SVG, no scripts; both pages are checked in a browser
/// (scripts/render_html_check.sh).

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace expctl::report::chart {

// Plot geometry (SVG user units): a fixed view box that the browser scales to the page width.
inline constexpr double k_width = 640;
inline constexpr double k_height = 260;
inline constexpr double k_left = 60;
inline constexpr double k_right = 20;
inline constexpr double k_top = 20;
inline constexpr double k_bottom = 40;
inline constexpr std::string_view k_blue = "#1f77b4";
inline constexpr std::string_view k_red = "#d62728";

struct Range {
  double low = 0;
  double high = 1;
};

/// One axis of a plot: linear, or log10 (then `range` holds the logarithms of its ends).
struct Scale {
  Range range;
  bool log = false;
  /// `value` mapped from the range onto [out_low, out_high].
  double at(double value, double out_low, double out_high) const;
  /// Onto the plot's width, and onto its height (upwards).
  double x(double value) const { return at(value, k_left, k_width - k_right); }
  double y(double value) const { return at(value, k_height - k_bottom, k_top); }
};

/// The finite values of all `parts`, low to high, widened by 5 % each way when they are one value
/// ({0, 1} when none is finite). `allow_log`: a log10 scale when they are all positive and span
/// 20x or more.
Scale scale_of(std::initializer_list<std::span<const double>> parts, bool allow_log = false);

/// `<svg id=... viewBox="0 0 640 260" role="img"><title>...</title>`; the caller closes it.
std::string svg_open(std::string_view id, std::string_view title);
/// The axes of a plot: both lines, the values at their ends (detail::number: 6 significant
/// digits), and their labels (" (log scale)" after the label of a log axis).
std::string axes(const Scale& x, const Scale& y, std::string_view x_label, std::string_view y_label);

/// `<!DOCTYPE html>` to `<body>`: the title and the shared style, then `extra_style` (the page's own rules).
std::string page_open(std::string_view title, std::string_view extra_style);
std::string page_close();

struct TableOptions {
  std::string_view id{};                                     ///< the table's id attribute; empty: none
  std::vector<std::string> row_classes{};                    ///< the class of row i, where given
  size_t numeric_from = std::numeric_limits<size_t>::max();  ///< cells from this column on: class "num"
};
/// A table with a header row; every cell escaped.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  const TableOptions& options = {});
/// `<ul id=...>` with one escaped `<li>` per item.
std::string list(std::string_view id, const std::vector<std::string>& items);

}  // namespace expctl::report::chart
