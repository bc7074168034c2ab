#include "expctl/util/text_table.hpp"

#include <algorithm>

#include "expctl/util/error.hpp"
#include "expctl/util/strings.hpp"

namespace expctl::util {

namespace {

// Display width in code points: good enough for the ASCII and UTF-8 text we print.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& text, size_t width, TextTable::Align align) {
  const size_t w = display_width(text);
  const std::string fill(width > w ? width - w : 0, ' ');
  return align == TextTable::Align::left ? text + fill : fill + text;
}

}  // namespace

// Cells hold stored strings (run names, tags, metric names): terminal_safe, one line each.
TextTable::TextTable(std::vector<std::string> header)
    : m_header(std::move(header)), m_align(m_header.size(), Align::left) {
  for (auto& cell : m_header) {
    cell = terminal_safe(cell, /*keep_newlines=*/false);
  }
}

void TextTable::set_align(size_t column, Align align) {
  EXPCTL_ASSERT(column < m_align.size(), "column {} out of range", column);
  m_align[column] = align;
}

void TextTable::add_row(std::vector<std::string> cells) {
  EXPCTL_ASSERT(cells.size() <= m_header.size(), "row has {} cells, table has {} columns", cells.size(), m_header.size());
  cells.resize(m_header.size());
  for (auto& cell : cells) {
    cell = terminal_safe(cell, /*keep_newlines=*/false);
  }
  m_rows.push_back(std::move(cells));
}

std::string TextTable::render() const {
  std::vector<size_t> widths(m_header.size());
  for (size_t c = 0; c < m_header.size(); ++c) {
    widths[c] = display_width(m_header[c]);
    for (const auto& row : m_rows) {
      widths[c] = std::max(widths[c], display_width(row[c]));
    }
  }
  auto render_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      line += (c > 0 ? "  " : "") + pad(cells[c], widths[c], m_align[c]);
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    return line + "\n";
  };
  std::string out = render_row(m_header);
  std::vector<std::string> rule;
  for (const size_t w : widths) {
    rule.emplace_back(w, '-');
  }
  out += render_row(rule);
  for (const auto& row : m_rows) {
    out += render_row(row);
  }
  return out;
}

}  // namespace expctl::util
