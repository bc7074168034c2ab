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

}  // namespace expctl::util
