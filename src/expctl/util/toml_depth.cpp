#include "expctl/util/toml_depth.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace expctl::util {

namespace {

// The scan of toml_key_dots; also notes the first byte over 0x7F outside strings and comments.
std::size_t scan(std::string_view text, std::size_t* first_non_ascii) {
  std::size_t most = 0;
  std::size_t dots = 0;
  std::size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a byte order mark
  const auto skip_string = [&](char quote) {
    const bool multi_line = text.substr(i, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''");
    i += multi_line ? 3 : 1;
    while (i < text.size()) {
      if (quote == '"' && text[i] == '\\') {
        i += 2;
        continue;
      }
      if (text[i] == quote && (!multi_line || text.substr(i, 3) == std::string_view(quote == '"' ? "\"\"\"" : "'''"))) {
        i += multi_line ? 3 : 1;
        return;
      }
      if (!multi_line && text[i] == '\n') {
        return;  // an unterminated string: toml++ reports it
      }
      ++i;
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      skip_string(c);
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') {
        ++i;
      }
      continue;
    }
    if (static_cast<unsigned char>(c) > 0x7F && first_non_ascii != nullptr && *first_non_ascii == std::string_view::npos) {
      *first_non_ascii = i;
    }
    if (c == '.') {
      most = std::max(most, ++dots);
    } else if (c == '=' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '\n') {
      dots = 0;
    }
    ++i;
  }
  return most;
}

}  // namespace

std::size_t toml_key_dots(std::string_view text) {
  return scan(text, nullptr);
}

std::string toml_key_depth_problem(std::string_view text) {
  if (scan(text, nullptr) >= k_max_toml_key_depth) {
    return "keys nested more than 64 levels deep (a.b.c... or [a.b.c...]): a profile needs two or three";
  }
  // toml++ 3.3.0 reaches an unreachable point (undefined behaviour) for some code points it meets
  // outside a string, and where its strings begin cannot be told without its whole grammar (a
  // `"` after `07:32` opens none): so non-ASCII is allowed only in whole-line comments, where no
  // parser state can put it outside a comment or a multi-line string (fuzz_env_profile found both).
  std::size_t line = 1;
  bool comment_line = false;
  bool line_start = true;
  for (std::size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      comment_line = false;
      line_start = true;
      continue;
    }
    if (line_start && c != ' ' && c != '\t' && c != '\r') {
      comment_line = c == '#';
      line_start = false;
    }
    if (static_cast<unsigned char>(c) > 0x7F && !comment_line) {
      return "line " + std::to_string(line) +
             ": a non-ASCII character: a profile is ASCII except in whole-line # comments (toml++ 3.3.0, which "
             "reads it, mishandles some characters elsewhere): spell the value in ASCII";
    }
  }
  return {};
}

}  // namespace expctl::util
