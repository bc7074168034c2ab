// Markdown escaping (markdown.hpp).
#include "expctl/util/markdown.hpp"

#include <algorithm>

namespace expctl::util {

namespace {

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

}  // namespace

std::string md_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (const char c : text) {
    switch (c) {
      case '\\':
      case '[':
      case ']':
      case '<':
      case '>':
      case '&':
      case '|':
        out += '\\';
        out += c;
        break;
      default:
        out += is_control(c) ? ' ' : c;
    }
  }
  return out;
}

std::string md_code(std::string_view text) {
  std::string body;
  body.reserve(text.size());
  std::size_t run = 0;
  std::size_t longest = 0;
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
    if (c == '|') {
      body += "\\|";
    } else {
      body += is_control(c) ? ' ' : c;
    }
  }
  const std::string fence(longest + 1, '`');
  // A span that starts or ends with a backtick needs a space inside its fence (CommonMark strips one).
  const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`');
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::vector<std::string> md_cells(const std::vector<std::string>& cells, const std::vector<std::size_t>& code_columns) {
  std::vector<std::string> out;
  out.reserve(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const bool code = std::find(code_columns.begin(), code_columns.end(), i) != code_columns.end();
    out.push_back(code ? md_code(cells[i]) : md_text(cells[i]));
  }
  return out;
}

std::string md_row(const std::vector<std::string>& markdown_cells) {
  std::string line = "|";
  for (const auto& cell : markdown_cells) {
    line += " " + cell + " |";
  }
  return line + "\n";
}

}  // namespace expctl::util
