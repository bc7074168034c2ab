#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "expctl/report/chart.hpp"
#include "expctl/report/format.hpp"
#include "expctl/report/report.hpp"

namespace expctl::report {
namespace {

using chart::k_height;
using chart::k_left;
using chart::k_right;
using chart::k_top;
using chart::k_width;
using chart::Range;
using chart::Scale;

using chart::k_bottom;
constexpr size_t k_bins = 30;
constexpr std::string_view k_color_a = chart::k_blue;
constexpr std::string_view k_color_b = chart::k_red;

// Compare's own rules, after the shared style (chart.hpp).
constexpr std::string_view k_style = R"(h1.no_regression{color:#1a7f37}h1.regression{color:#cf222e}
h1.not_comparable{color:#9a6700}h1.inconclusive{color:#9a6700}tr.inconclusive td{background:#fff8c5}
tr.regression td{background:#ffebe9}tr.improvement td{background:#dafbe1}
.a{color:#1f77b4}.b{color:#d62728}code{background:#f6f8fa}
)";

Scale range_of(const std::vector<double>& first, const std::vector<double>& second) {
  return chart::scale_of({first, second});
}

std::string legend() {
  return fmt::format(
      R"(<rect x="{0}" y="4" width="10" height="10" fill="{1}"/><text x="{2}" y="13" font-size="11">A</text>)"
      R"(<rect x="{3}" y="4" width="10" height="10" fill="{4}"/><text x="{5}" y="13" font-size="11">B</text>)",
      k_width - 90, k_color_a, k_width - 76, k_width - 50, k_color_b, k_width - 36);
}

// The curve's minimum and maximum in each pixel column of the plot (a min/max envelope): a long
// run draws at most two points per column, and no spike between drawn points is lost.
struct Column {
  double low = INFINITY;
  double high = -INFINITY;
};

std::vector<Column> envelope(const std::vector<std::int64_t>& steps, const std::vector<double>& values,
                             const Scale& x) {
  const auto columns = static_cast<size_t>(k_width - k_left - k_right);
  std::vector<Column> envelope(columns + 1);
  for (size_t i = 0; i < values.size() && i < steps.size(); ++i) {
    if (!std::isfinite(values[i])) {
      continue;
    }
    const double position = x.at(static_cast<double>(steps[i]), 0, static_cast<double>(columns));
    Column& column = envelope[std::min(columns, static_cast<size_t>(std::max(0.0, std::round(position))))];
    column.low = std::min(column.low, values[i]);
    column.high = std::max(column.high, values[i]);
  }
  return envelope;
}

std::string polyline(const std::vector<std::int64_t>& steps, const std::vector<double>& values, const Scale& x,
                     const Scale& y, std::string_view color, std::string_view side) {
  std::string points;
  const auto columns = envelope(steps, values, x);
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].low > columns[i].high) {
      continue;
    }
    const double px = k_left + static_cast<double>(i);
    points += fmt::format("{:.2f},{:.2f} ", px, y.y(columns[i].high));
    if (columns[i].low < columns[i].high) {
      points += fmt::format("{:.2f},{:.2f} ", px, y.y(columns[i].low));
    }
  }
  if (!points.empty()) {
    points.pop_back();
  }
  return fmt::format(R"(<polyline class="curve-{}" fill="none" stroke="{}" stroke-width="1.5" points="{}"/>)", side,
                     color, points);
}

Scale step_range(const compare::Comparison& comparison) {
  std::vector<double> ends;
  for (const auto* side : {&comparison.loss_steps_a, &comparison.loss_steps_b}) {
    if (!side->empty()) {
      ends.push_back(static_cast<double>(side->front()));
      ends.push_back(static_cast<double>(side->back()));
    }
  }
  return range_of(ends, {});
}

std::string loss_plot(const compare::Comparison& comparison) {
  const Scale x = step_range(comparison);
  const Scale y = range_of(comparison.loss_a, comparison.loss_b);
  std::string svg =
      chart::svg_open("loss-curves", "training loss per step, A and B") + chart::axes(x, y, "step", "loss") + legend();
  svg += polyline(comparison.loss_steps_a, comparison.loss_a, x, y, k_color_a, "a");
  svg += polyline(comparison.loss_steps_b, comparison.loss_b, x, y, k_color_b, "b");
  return svg + "</svg>\n";
}

std::vector<size_t> histogram(const std::vector<double>& values, Range range) {
  std::vector<size_t> counts(k_bins, 0);
  for (const double value : values) {
    const double position = (value - range.low) / (range.high - range.low) * static_cast<double>(k_bins);
    counts[std::min(k_bins - 1, static_cast<size_t>(std::max(0.0, position)))] += 1;
  }
  return counts;
}

std::string throughput_plot(const compare::Comparison& comparison) {
  const Scale x = range_of(comparison.throughput_a, comparison.throughput_b);
  const auto counts_a = histogram(comparison.throughput_a, x.range);
  const auto counts_b = histogram(comparison.throughput_b, x.range);
  const size_t peak = std::max<size_t>(1, std::max(*std::max_element(counts_a.begin(), counts_a.end()),
                                                   *std::max_element(counts_b.begin(), counts_b.end())));
  const Scale y{{0, static_cast<double>(peak)}};
  std::string svg = chart::svg_open("throughput", "distribution of per-step throughput, A and B") +
                    chart::axes(x, y, "samples/s per step", "steps") + legend();
  const double bin_width = (k_width - k_left - k_right) / static_cast<double>(k_bins);
  for (const auto& [counts, color, side] :
       {std::tuple{&counts_a, k_color_a, "a"}, std::tuple{&counts_b, k_color_b, "b"}}) {
    for (size_t bin = 0; bin < k_bins; ++bin) {
      if ((*counts)[bin] == 0) {
        continue;
      }
      const double top = y.y(static_cast<double>((*counts)[bin]));
      svg += fmt::format(
          R"(<rect class="bar-{}" x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}" fill-opacity="0.5"/>)",
          side, k_left + bin_width * static_cast<double>(bin), top, bin_width, k_height - k_bottom - top, color);
    }
  }
  return svg + "</svg>\n";
}

// The phases of a step, in bar order, with their colours.
struct PhaseColour {
  const char* name;
  const char* colour;
};
constexpr PhaseColour k_phases[] = {{"data", "#8c564b"},  {"forward", "#2ca02c"},   {"backward", "#1f77b4"},
                                    {"comm", "#d62728"},  {"optimizer", "#9467bd"}, {"other", "#bbbbbb"}};
constexpr double k_bar = 18;
constexpr double k_bar_gap = 6;

std::vector<std::optional<double>> shares_of(const compare::RankPhases& row) {
  const auto& s = row.shares;
  return {s.data, s.forward, s.backward, s.comm, s.optimizer, row.other};
}

// One bar: a rank's step time split into its phases, the whole width being the whole step.
std::string phase_bar(const compare::RankPhases& row, std::string_view side, double top) {
  std::string svg = fmt::format(R"(<text x="4" y="{:.1f}" font-size="11">{} rank {}</text>)", top + 13, side, row.rank);
  double x = k_left + 20;
  const double width = k_width - k_left - 20 - k_right;
  const auto shares = shares_of(row);
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (!shares[i]) {
      continue;  // not timed: no bar, rather than a false 0 %
    }
    const double w = std::max(0.0, *shares[i]) * width;
    svg += fmt::format(
        R"(<rect class="phase-{0}" x="{1:.2f}" y="{2:.1f}" width="{3:.2f}" height="{4}" fill="{5}">)"
        R"(<title>{6} rank {7}: {0} {8:.1f}% of {9:.3f} ms</title></rect>)",
        k_phases[i].name, x, top, w, k_bar, k_phases[i].colour, side, row.rank, 100.0 * *shares[i], row.step_time_ms);
    x += w;
  }
  return svg;
}

std::string phase_legend(double top) {
  std::string svg;
  double x = k_left + 20;
  for (const auto& phase : k_phases) {
    svg += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="10" height="10" fill="{}"/>)"
                       R"(<text x="{:.1f}" y="{:.1f}" font-size="11">{}</text>)",
                       x, top, phase.colour, x + 14, top + 9, phase.name);
    x += 90;
  }
  return svg;
}

// Stacked bars per rank and side (first run of each): where the step time went.
std::string phase_plot(const compare::Comparison& comparison) {
  const auto rows = comparison.phases_a.size() + comparison.phases_b.size();
  const auto timed = [](const std::vector<compare::RankPhases>& phases) {
    return std::any_of(phases.begin(), phases.end(), [](const auto& row) { return row.shares.any(); });
  };
  if (rows == 0 || (!timed(comparison.phases_a) && !timed(comparison.phases_b))) {
    return "<p>No phase timers in these runs: the built-in trainer records them; a program's run has them only "
           "when the program logs data_wait_ms, forward_ms, backward_ms, comm_wait_ms or optimizer_ms.</p>\n";
  }
  const double height = k_top + static_cast<double>(rows) * (k_bar + k_bar_gap) + 30;
  std::string svg = fmt::format(
      R"(<svg id="phases" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {:.0f}" role="img">)"
      R"(<title>share of step time per phase, per rank, A and B</title>)",
      k_width, height);
  double top = k_top;
  for (const auto& [side, phases] : {std::pair{"A", &comparison.phases_a}, std::pair{"B", &comparison.phases_b}}) {
    for (const auto& row : *phases) {
      svg += phase_bar(row, side, top);
      top += k_bar + k_bar_gap;
    }
  }
  return svg + phase_legend(top + 4) + "</svg>\n";
}

// The slowest rank's compute time over the median's, per step (min/max envelope per column).
std::string straggler_plot(const compare::Comparison& comparison) {
  const auto& a = comparison.straggler_a;
  const auto& b = comparison.straggler_b;
  if (a.scores.empty() && b.scores.empty()) {
    return "<p>No straggler scores (runs of one rank, or of an older version).</p>\n";
  }
  std::vector<double> ends;
  for (const auto* side : {&a, &b}) {
    if (!side->steps.empty()) {
      ends.push_back(static_cast<double>(side->steps.front()));
      ends.push_back(static_cast<double>(side->steps.back()));
    }
  }
  const Scale x = range_of(ends, {});
  const Scale y = range_of(a.scores, b.scores);
  std::string svg =
      chart::svg_open("straggler", "straggler score per step (slowest rank's compute time over the median's)") +
      chart::axes(x, y, "step", "straggler score") + legend();
  svg += polyline(a.steps, a.scores, x, y, k_color_a, "a");
  svg += polyline(b.steps, b.scores, x, y, k_color_b, "b");
  return svg + "</svg>\n";
}

std::string metrics_table(const compare::Comparison& comparison) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> classes;
  for (const auto& row : comparison.metrics) {
    rows.push_back(detail::metric_cells(row));
    std::string status(compare::to_string(row.verdict.status));
    std::replace(status.begin(), status.end(), ' ', '_');
    classes.push_back(status);
  }
  if (rows.empty()) {
    return "<p>No metrics on either side.</p>\n";
  }
  std::string html = chart::table(detail::metric_header(), rows, {.row_classes = classes});
  const auto notes = detail::verdict_notes(comparison);
  return notes.empty() ? html : html + chart::list("verdict-notes", notes);
}

std::string runs_table(const compare::Comparison& comparison) {
  return chart::table(detail::run_header(comparison), detail::run_rows(comparison)) +
         "<p>History: " + xml_escape(detail::history_text(comparison)) + "</p>\n";
}

std::string spec_table(const compare::Comparison& comparison) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& change : comparison.spec_changes) {
    rows.push_back({change.path, detail::value_text(change.old_value), detail::value_text(change.new_value),
                    change.hashed ? "yes" : "no"});
  }
  return rows.empty() ? "<p>No differences.</p>\n" : chart::table({"key", "A", "B", "hashed"}, rows);
}

std::string env_table(const compare::Comparison& comparison) {
  if (!comparison.env_available) {
    return "<p>Not available (a run has no stored fingerprint).</p>\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : comparison.env_changes) {
    rows.push_back({row.group, row.field, row.left, row.right, row.hashed ? "yes" : "no"});
  }
  return rows.empty() ? "<p>No differences.</p>\n" : chart::table({"group", "field", "A", "B", "hashed"}, rows);
}

}  // namespace

std::string render_html(const compare::Comparison& comparison) {
  std::string html = chart::page_open("expctl compare: " + comparison.verdict_line(), k_style);
  html += fmt::format("<h1 id=\"verdict\" class=\"{}\">{}</h1>\n", compare::to_string(comparison.outcome),
                      xml_escape(comparison.verdict_line()));
  html += fmt::format("<p><b class=\"a\">A</b> <code>{}</code> ({}, spec <code>{}</code>, started {})<br>\n",
                      xml_escape(detail::ids_text(comparison.a)), xml_escape(comparison.a.name),
                      xml_escape(comparison.a.spec_hash.substr(0, 12)), xml_escape(comparison.a.started_at));
  html += fmt::format("<b class=\"b\">B</b> <code>{}</code> ({}, spec <code>{}</code>, started {})</p>\n",
                      xml_escape(detail::ids_text(comparison.b)), xml_escape(comparison.b.name),
                      xml_escape(comparison.b.spec_hash.substr(0, 12)), xml_escape(comparison.b.started_at));
  html += "<h2>Metrics</h2>\n" + metrics_table(comparison);
  html += "<h2>Runs</h2>\n" + runs_table(comparison);
  html += "<h2>Loss curves</h2>\n<p>" + xml_escape(detail::curve_text(comparison.curve)) + "</p>\n";
  if (comparison.reproducibility.required) {
    html += "<p>Reproducibility: " + xml_escape(comparison.reproducibility.reason) + "</p>\n";
  }
  html += loss_plot(comparison);
  html += "<h2>Throughput distributions</h2>\n" + throughput_plot(comparison);
  html += "<h2>Where the time went, per rank</h2>\n" + phase_plot(comparison);
  html += "<h2>Straggler timeline</h2>\n" + straggler_plot(comparison);
  html += "<h2>Spec differences</h2>\n" + spec_table(comparison);
  html += "<h2>Environment differences</h2>\n" + env_table(comparison);
  return html + chart::page_close();
}

}  // namespace expctl::report
