#include "expctl/util/toml_depth.hpp"

#include <algorithm>

namespace expctl::util {

std::size_t toml_key_dots(std::string_view text) {
  std::size_t most = 0;
  std::size_t dots = 0;
  std::size_t i = 0;
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
    if (c == '.') {
      most = std::max(most, ++dots);
    } else if (c == '=' || c == ',' || c == '[' || c == ']' || c == '{' || c == '}' || c == '\n') {
      dots = 0;
    }
    ++i;
  }
  return most;
}

std::string toml_key_depth_problem(std::string_view text) {
  if (toml_key_dots(text) < k_max_toml_key_depth) {
    return {};
  }
  return "keys nested more than 64 levels deep (a.b.c... or [a.b.c...]): a profile needs two or three";
}

}  // namespace expctl::util
